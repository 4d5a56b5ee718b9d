package nodeagent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingSource issues distinct tokens valid for an hour from its clock and counts its calls;
// it blocks until release is closed so that concurrent misses overlap.
type countingSource struct {
	now     func() time.Time
	calls   atomic.Int64
	release chan struct{}
}

func (s *countingSource) Token(_ context.Context, id Identity, resource string) (Token, error) {
	n := s.calls.Add(1)
	<-s.release
	return Token{AccessToken: "t" + string(rune('0'+n)), ClientID: id.ClientID, Resource: resource, ExpiresOn: s.now().Add(time.Hour)}, nil
}

func TestCacheServesUntilFiveMinutesBeforeExpiryAndSharesMisses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	src := &countingSource{now: clock, release: make(chan struct{})}
	c := NewCache(src, clock)
	id := Identity{ClientID: "11111111-1111-1111-1111-111111111111"}

	var wg sync.WaitGroup
	tokens := make([]string, 20)
	for i := range tokens {
		wg.Go(func() {
			tok, _, err := c.Token(t.Context(), id, "https://vault.azure.net")
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok.AccessToken
		})
	}
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(src.release)
	wg.Wait()
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("20 concurrent misses made %d upstream calls, want 1", got)
	}
	for _, tok := range tokens {
		if tok != tokens[0] {
			t.Fatalf("concurrent callers got different tokens: %v", tokens)
		}
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	advance(54*time.Minute + 59*time.Second)
	if _, cached, _ := c.Token(t.Context(), id, "https://vault.azure.net"); !cached {
		t.Fatal("a token with 5m1s left was not served from the cache")
	}
	if _, cached, _ := c.Token(t.Context(), id, "https://management.azure.com/"); cached {
		t.Fatal("another resource was served from the cache")
	}
	advance(2 * time.Second)
	if _, cached, _ := c.Token(t.Context(), id, "https://vault.azure.net"); cached {
		t.Fatal("a token with 4m59s left was served from the cache")
	}
	if got := src.calls.Load(); got != 3 {
		t.Fatalf("upstream calls %d, want 3", got)
	}
}
