package csiprovider

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// objectCache holds fetched objects by (identity, vault, object, version). Concurrent misses of
// one key share a single fetch. An entry with ttl 0 (a pinned version) does not expire; the
// cache is bounded by entries, dropping expired entries first and then the oldest.
type objectCache struct {
	max    int
	now    func() time.Time
	mu     sync.Mutex
	m      map[string]cacheEntry
	flight singleflight.Group
}

type cacheEntry struct {
	val     []fetched
	stored  time.Time
	expires time.Time // zero: never
}

func newObjectCache(max int, now func() time.Time) *objectCache {
	return &objectCache{max: max, now: now, m: map[string]cacheEntry{}}
}

// get returns the entry for key if it has not expired, else fetches it once for all callers.
// Failures are not cached.
func (c *objectCache) get(key string, ttl time.Duration, fetch func() ([]fetched, error)) ([]fetched, error) {
	fresh := func() ([]fetched, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		e, ok := c.m[key]
		return e.val, ok && (e.expires.IsZero() || c.now().Before(e.expires))
	}
	if val, ok := fresh(); ok {
		cacheLookups.WithLabelValues("hit").Inc()
		return val, nil
	}
	cacheLookups.WithLabelValues("miss").Inc()
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if val, ok := fresh(); ok { // a flight that ended just before this one began
			return val, nil
		}
		val, err := fetch()
		if err != nil {
			return nil, err
		}
		now := c.now()
		e := cacheEntry{val: val, stored: now}
		if ttl > 0 {
			e.expires = now.Add(ttl)
		}
		c.mu.Lock()
		c.evict(now)
		c.m[key] = e
		c.mu.Unlock()
		return val, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]fetched), nil
}

// evict makes room for one entry; called with mu held.
func (c *objectCache) evict(now time.Time) {
	if len(c.m) < c.max {
		return
	}
	for k, e := range c.m {
		if !e.expires.IsZero() && !now.Before(e.expires) {
			delete(c.m, k)
		}
	}
	for len(c.m) >= c.max {
		var oldest string
		var at time.Time
		for k, e := range c.m {
			if oldest == "" || e.stored.Before(at) {
				oldest, at = k, e.stored
			}
		}
		delete(c.m, oldest)
	}
}
