package arm

import (
	"math"
	"sync"
	"time"
)

// Limits are ARM's token buckets, kept per subscription and principal: a request takes one
// token; tokens come back at the refill rate up to the burst.
type Limits struct {
	Reads, ReadsPerSecond   float64
	Writes, WritesPerSecond float64 // writes and deletes
}

// DefaultLimits are Azure's current per-principal subscription limits.
var DefaultLimits = Limits{Reads: 250, ReadsPerSecond: 25, Writes: 200, WritesPerSecond: 10}

// Unlimited never throttles (benchmarks); the headers still count down from a large budget.
var Unlimited = Limits{Reads: math.MaxInt32, ReadsPerSecond: math.MaxInt32, Writes: math.MaxInt32, WritesPerSecond: math.MaxInt32}

type bucket struct {
	tokens float64
	last   time.Time
}

// throttle holds the buckets. Memory is bounded by subscriptions × principals that call.
type throttle struct {
	mu      sync.Mutex
	limits  Limits
	now     func() time.Time
	buckets map[string]*bucket
}

func newThrottle(l Limits, now func() time.Time) *throttle {
	return &throttle{limits: l, now: now, buckets: map[string]*bucket{}}
}

// take spends a token of the read or write bucket of key. It returns the tokens left and,
// when none was left, how long until one is.
func (t *throttle) take(key string, write bool) (remaining int, wait time.Duration) {
	burst, rate := t.limits.Reads, t.limits.ReadsPerSecond
	if write {
		burst, rate = t.limits.Writes, t.limits.WritesPerSecond
		key += "|w"
	} else {
		key += "|r"
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.buckets[key]
	if !ok {
		b = &bucket{tokens: burst, last: now}
		t.buckets[key] = b
	}
	if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = math.Min(burst, b.tokens+d*rate)
	}
	b.last = now
	if b.tokens < 1 {
		return 0, time.Duration((1 - b.tokens) / rate * float64(time.Second))
	}
	b.tokens--
	return int(b.tokens), 0
}
