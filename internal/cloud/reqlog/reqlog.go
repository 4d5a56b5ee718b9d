// Package reqlog is the local cloud's request log: one entry per request (service, method,
// path, api-version, the authenticated principal's object id, status, time), kept in memory so
// tests can count the calls a client made. It never holds a query string other than the
// api-version, a header, a body or a token: those carry secrets.
package reqlog

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultSize is how many entries a Log keeps when New gets 0.
const DefaultSize = 10000

// Entry is one served request. Its time is the cloud's clock's.
type Entry struct {
	Seq        uint64    `json:"seq"` // 1, 2, ... in the order requests ended
	Time       time.Time `json:"time"`
	Service    string    `json:"service"`         // arm, keyvault, entra, msi
	Vault      string    `json:"vault,omitempty"` // the vault a keyvault request went to
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	APIVersion string    `json:"apiVersion,omitempty"`
	Principal  string    `json:"principalId,omitempty"` // object id, once the service authenticated the caller
	Status     int       `json:"status"`
	Fault      string    `json:"fault,omitempty"` // the fault rule that answered or delayed it
	// Reason says in words why a request was refused, where the service that refused it knows
	// (which federated credentials exist, which roles the principal holds). Never a secret.
	Reason string `json:"reason,omitempty"`
}

// Filter selects entries; zero fields match everything. Strings compare case-insensitively.
type Filter struct {
	Service    string
	Method     string
	PathPrefix string
	Vault      string
	Principal  string
	Status     int
	Since      uint64 // only entries with Seq > Since
}

func (f Filter) match(e Entry) bool {
	eq := func(want, got string) bool { return want == "" || strings.EqualFold(want, got) }
	return eq(f.Service, e.Service) && eq(f.Method, e.Method) && eq(f.Principal, e.Principal) && eq(f.Vault, e.Vault) &&
		(f.PathPrefix == "" || strings.HasPrefix(strings.ToLower(e.Path), strings.ToLower(f.PathPrefix))) &&
		(f.Status == 0 || f.Status == e.Status) && e.Seq > f.Since
}

// Log is a bounded, concurrency-safe ring of entries.
type Log struct {
	mu      sync.Mutex
	entries []Entry
	next    int // where the next entry goes once the ring is full
	size    int
	seq     uint64
}

// New returns a log that keeps the last size entries (0 = DefaultSize).
func New(size int) *Log {
	if size <= 0 {
		size = DefaultSize
	}
	return &Log{size: size}
}

// Add appends e, numbering it.
func (l *Log) Add(e Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	e.Seq = l.seq
	if len(l.entries) < l.size {
		l.entries = append(l.entries, e)
		return
	}
	l.entries[l.next] = e
	l.next = (l.next + 1) % l.size
}

// Entries returns the kept entries that f selects, oldest first.
func (l *Log) Entries(f Filter) []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entriesLocked(f)
}

func (l *Log) entriesLocked(f Filter) []Entry {
	out := []Entry{}
	n := len(l.entries)
	// Oldest first from l.next: a follower's Since skips to its first new entry, so the live
	// log's polls cost what they return, not the log's size (the lock is the request path's).
	start := sort.Search(n, func(i int) bool { return l.entries[(l.next+i)%n].Seq > f.Since })
	for i := start; i < n; i++ {
		e := l.entries[(l.next+i)%n]
		if f.match(e) {
			out = append(out, e)
		}
	}
	return out
}

// Read is Entries(f) with the newest sequence number at that instant, taken together: a
// follower that asks next with Since: last misses no entry added in between.
func (l *Log) Read(f Filter) (entries []Entry, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.entriesLocked(f), l.seq
}

// Count is len(Entries(f)).
func (l *Log) Count(f Filter) int { return len(l.Entries(f)) }

// Last is the sequence number of the newest entry (0 for none): a test takes it before acting
// and filters with Since to see only what followed.
func (l *Log) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Clear drops every entry; numbering continues.
func (l *Log) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries, l.next = nil, 0
}

// Principal slots: the middleware that records a request cannot see who made it (only the
// service verifies the token), so it puts a slot in the request's context and the service fills
// it once it has authenticated the caller.

type slotKey struct{}

type slot struct {
	mu     sync.Mutex
	id     string
	reason string
}

// WithSlot returns ctx with an empty principal slot, and a function that reads it.
func WithSlot(ctx context.Context) (context.Context, func() string) {
	s := &slot{}
	return context.WithValue(ctx, slotKey{}, s), func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.id
	}
}

// SetPrincipal records the authenticated caller's object id for the request log; without a
// slot in ctx (a service used on its own) it does nothing.
func SetPrincipal(ctx context.Context, objectID string) {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.mu.Lock()
		s.id = objectID
		s.mu.Unlock()
	}
}

// SetReason records why the request is refused, for the request log. The first reason set
// wins: the code that decides a refusal knows more than the adapter that writes the error.
func SetReason(ctx context.Context, reason string) {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.mu.Lock()
		if s.reason == "" {
			s.reason = reason
		}
		s.mu.Unlock()
	}
}

// ReasonOf is the reason recorded in ctx's slot ("" for none).
func ReasonOf(ctx context.Context) string {
	s, ok := ctx.Value(slotKey{}).(*slot)
	if !ok {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}
