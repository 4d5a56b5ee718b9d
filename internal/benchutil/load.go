// Package benchutil runs bounded load against a function and summarises its latency.
package benchutil

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Result summarises one load run.
type Result struct {
	Concurrency int
	Requests    int
	Errors      int
	Elapsed     time.Duration
	P50, P99    time.Duration
}

// RPS is the completed-request rate over the run.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// String renders the result as a table cell.
func (r Result) String() string {
	s := fmt.Sprintf("%.0f rps, p50 %s, p99 %s", r.RPS(), round(r.P50), round(r.P99))
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors", r.Errors)
	}
	return s
}

func round(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d > 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// Load calls fn from concurrency goroutines until total calls were made or the duration passed,
// whichever comes first; both bounds keep a load test from running away.
func Load(ctx context.Context, concurrency, total int, duration time.Duration, fn func(context.Context) error) Result {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, total)
		errs      int
		next      = make(chan struct{}, total)
	)
	for range total {
		next <- struct{}{}
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for range next {
				if ctx.Err() != nil {
					return
				}
				t := time.Now()
				err := fn(ctx)
				d := time.Since(t)
				mu.Lock()
				if err != nil {
					errs++
				} else {
					latencies = append(latencies, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res := Result{Concurrency: concurrency, Requests: len(latencies), Errors: errs, Elapsed: time.Since(start)}
	slices.Sort(latencies)
	res.P50 = percentile(latencies, 0.50)
	res.P99 = percentile(latencies, 0.99)
	return res
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// Median combines runs of one load, measured in rounds interleaved with other loads so that
// the machine's drift reaches them all: each percentile is the runs' median (one noisy round
// does not decide it), and the counts and time are the runs' totals.
func Median(runs []Result) Result {
	if len(runs) == 0 {
		return Result{}
	}
	var out Result
	p50s := make([]time.Duration, len(runs))
	p99s := make([]time.Duration, len(runs))
	for i, r := range runs {
		out.Concurrency = r.Concurrency
		out.Requests += r.Requests
		out.Errors += r.Errors
		out.Elapsed += r.Elapsed
		p50s[i], p99s[i] = r.P50, r.P99
	}
	slices.Sort(p50s)
	slices.Sort(p99s)
	out.P50, out.P99 = p50s[len(runs)/2], p99s[len(runs)/2]
	return out
}
