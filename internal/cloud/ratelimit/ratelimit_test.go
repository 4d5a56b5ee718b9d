package ratelimit

import (
	"testing"
	"time"
)

func TestBucketOnInjectedClock(t *testing.T) {
	now := time.Unix(1000, 0)
	b := New(func() time.Time { return now })
	l := Limit{Burst: 2, PerSecond: 0.5}
	if left, wait := b.Take("k", l); left != 1 || wait != 0 {
		t.Fatalf("first: %d %v", left, wait)
	}
	if left, wait := b.Take("k", l); left != 0 || wait != 0 {
		t.Fatalf("second: %d %v", left, wait)
	}
	if _, wait := b.Take("k", l); wait != 2*time.Second {
		t.Fatalf("empty: wait %v, want 2s", wait)
	}
	if left, wait := b.Take("other", l); left != 1 || wait != 0 {
		t.Errorf("keys share a bucket: %d %v", left, wait)
	}
	now = now.Add(2 * time.Second)
	if left, wait := b.Take("k", l); left != 0 || wait != 0 {
		t.Errorf("after refill: %d %v", left, wait)
	}
	now = now.Add(-time.Hour) // a clock moved back refills nothing
	if _, wait := b.Take("k", l); wait == 0 {
		t.Errorf("a clock moved back refilled the bucket")
	}
	if _, wait := b.Take("never", Limit{Burst: 0}); wait <= 0 {
		t.Errorf("an empty bucket without refill did not throttle")
	}
}
