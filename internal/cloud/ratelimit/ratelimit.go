// Package ratelimit holds keyed token buckets on an injectable clock: ARM's per subscription
// and principal budgets and Key Vault's per vault budget are both this shape. A request takes
// one token; tokens come back at the refill rate up to the burst.
package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Limit is one bucket's size and refill rate.
type Limit struct {
	Burst     float64 // tokens when full
	PerSecond float64 // refill rate
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Buckets are token buckets by key. Memory is bounded by the keys that call (subscriptions ×
// principals, or vaults), which the local cloud keeps small.
type Buckets struct {
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

// New returns empty buckets on this clock (nil = time.Now).
func New(now func() time.Time) *Buckets {
	if now == nil {
		now = time.Now
	}
	return &Buckets{now: now, buckets: map[string]*bucket{}}
}

// Take spends a token of key's bucket, created full with limit l on first use. It returns the
// whole tokens left and, when none was left, how long until one is.
func (b *Buckets) Take(key string, l Limit) (remaining int, wait time.Duration) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.buckets[key]
	if !ok {
		bk = &bucket{tokens: l.Burst, last: now}
		b.buckets[key] = bk
	}
	// A clock that moved back (a test's) refills nothing rather than draining.
	if d := now.Sub(bk.last).Seconds(); d > 0 {
		bk.tokens = math.Min(l.Burst, bk.tokens+d*l.PerSecond)
		bk.last = now
	}
	if bk.tokens < 1 {
		if l.PerSecond <= 0 {
			return 0, time.Hour // never refills: a long wait rather than a division by zero
		}
		return 0, time.Duration((1 - bk.tokens) / l.PerSecond * float64(time.Second))
	}
	bk.tokens--
	return int(bk.tokens), 0
}
