package faults

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request is what a rule is matched on.
type Request struct {
	Service      string // arm, keyvault, entra, msi
	Method       string
	ResourceType string // the ARM type of the request's id; "" outside ARM
}

// Decision is what the rules chose for one request. The zero value is "no fault".
type Decision struct {
	Rule       string        // names of the rules that fired, comma-separated
	Latency    time.Duration // total added latency
	Status     int           // 0 = let the service answer
	RetryAfter time.Duration // with Status 429 or 503
	LRO        *LRO          // an ARM write to make long-running
}

// Fired reports whether any rule fired.
func (d Decision) Fired() bool { return d.Rule != "" }

// Injector holds the active configuration and what its counted rules have left. It is safe for
// concurrent use; a nil *Injector injects nothing.
type Injector struct {
	mu   sync.Mutex
	cfg  Config
	left []int // per rule: fires left for counted rules, -1 for no limit
	rnd  *rand.Rand
}

// New returns an injector with no rules.
func New() *Injector {
	i := &Injector{}
	i.reset(Config{})
	return i
}

// Set validates cfg and makes it the active configuration, restarting counts and the random
// source. An invalid cfg leaves the active one in place.
func (i *Injector) Set(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	i.reset(cfg)
	return nil
}

func (i *Injector) reset(cfg Config) {
	i.cfg = cfg
	i.left = make([]int, len(cfg.Rules))
	for n, r := range cfg.Rules {
		i.left[n] = -1
		if r.Count > 0 {
			i.left[n] = r.Count
		}
	}
	// Not for security: a reproducible sequence of fault draws.
	i.rnd = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // deterministic on purpose
}

// Config returns the active configuration with each counted rule's remaining fires.
func (i *Injector) Config() (Config, []int) {
	if i == nil {
		return Config{}, nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	c := i.cfg
	c.Rules = append([]Rule(nil), i.cfg.Rules...)
	return c, append([]int(nil), i.left...)
}

// Decide runs the rules for r, spending counts and random draws of the rules that fire.
func (i *Injector) Decide(r Request) Decision {
	var d Decision
	if i == nil {
		return d
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var names []string
	for n, rule := range i.cfg.Rules {
		if !rule.matches(r) || i.left[n] == 0 {
			continue
		}
		if rule.Rate > 0 && rule.Rate < 1 && i.rnd.Float64() >= rule.Rate {
			continue
		}
		if i.left[n] > 0 {
			i.left[n]--
		}
		names = append(names, rule.name(n))
		d.Latency += time.Duration(rule.Latency)
		if rule.Status != 0 {
			d.Status = rule.Status
			d.RetryAfter = time.Duration(rule.RetryAfter)
			if d.RetryAfter == 0 {
				d.RetryAfter = DefaultRetryAfter
			}
			break
		}
		if rule.LRO != nil {
			lro := *rule.LRO
			if lro.Result == "" {
				lro.Result = ResultSucceeded
			}
			d.LRO = &lro
			break
		}
	}
	d.Rule = strings.Join(names, ",")
	return d
}

func (r Rule) name(i int) string {
	if r.Name != "" {
		return r.Name
	}
	return "rules[" + strconv.Itoa(i) + "]"
}

func (r Rule) matches(req Request) bool {
	if r.Method != "" && !strings.EqualFold(r.Method, req.Method) {
		return false
	}
	switch t := r.ResourceType; {
	case t == "":
		return true
	case isService(t):
		return strings.EqualFold(t, req.Service)
	default:
		return req.Service == ServiceARM && strings.EqualFold(t, req.ResourceType)
	}
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// The LRO a rule chose travels to ARM in the request's context: the middleware decides, the
// front door builds the operation.

type lroKey struct{}

// lroFault is what ARM needs to build the operation.
type lroFault struct {
	LRO
	rule string
}

// WithLRO returns ctx carrying the LRO fault of rule.
func WithLRO(ctx context.Context, rule string, l LRO) context.Context {
	return context.WithValue(ctx, lroKey{}, lroFault{LRO: l, rule: rule})
}

// LROFrom returns the LRO fault of the request, and the rule that chose it.
func LROFrom(ctx context.Context) (LRO, string, bool) {
	f, ok := ctx.Value(lroKey{}).(lroFault)
	return f.LRO, f.rule, ok
}
