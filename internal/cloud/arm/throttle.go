package arm

import (
	"math"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/ratelimit"
)

// Limits are ARM's token buckets, kept per subscription and principal: a request takes one
// token; tokens come back at the refill rate up to the burst.
type Limits struct {
	Reads, ReadsPerSecond   float64
	Writes, WritesPerSecond float64 // writes and deletes
	// RetryAfter, when set, is the Retry-After a 429 advertises instead of the time until a token
	// is back: tests keep it short so SDK retries stay fast while their clock decides refills.
	RetryAfter time.Duration
}

// DefaultLimits are Azure's current per-principal subscription limits; Config.Limits = &DefaultLimits
// (`cerulean-local cloud --throttle`) turns them on.
var DefaultLimits = Limits{Reads: 250, ReadsPerSecond: 25, Writes: 200, WritesPerSecond: 10}

// Unlimited never throttles (benchmarks); the headers still count down from a large budget.
var Unlimited = Limits{Reads: math.MaxInt32, ReadsPerSecond: math.MaxInt32, Writes: math.MaxInt32, WritesPerSecond: math.MaxInt32}

// throttle holds the buckets; a nil *throttle (no Config.Limits) never throttles.
type throttle struct {
	limits  Limits
	buckets *ratelimit.Buckets
}

func newThrottle(l *Limits, now func() time.Time) *throttle {
	if l == nil {
		return nil
	}
	return &throttle{limits: *l, buckets: ratelimit.New(now)}
}

// take spends a token of the read or write bucket of key. It returns the tokens left and,
// when none was left, how long the client should wait.
func (t *throttle) take(key string, write bool) (remaining int, wait time.Duration) {
	l := ratelimit.Limit{Burst: t.limits.Reads, PerSecond: t.limits.ReadsPerSecond}
	key += "|r"
	if write {
		l = ratelimit.Limit{Burst: t.limits.Writes, PerSecond: t.limits.WritesPerSecond}
		key = key[:len(key)-1] + "w"
	}
	remaining, wait = t.buckets.Take(key, l)
	if wait > 0 && t.limits.RetryAfter > 0 {
		wait = t.limits.RetryAfter
	}
	return remaining, wait
}
