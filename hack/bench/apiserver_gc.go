package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// kube-apiserver's garbage collector sets a paced run's tail unless the bench keeps it out: at
// the default GOGC, on two cores and with the heap the section's pods build, its mark phase took
// 0.2 to 1.4 s every ~15 s of the paced load, and most of the slowest pods, whatever the webhook,
// were created during one, so those phases, not the webhooks, made every load's p99. The section
// runs kube-apiserver with apiServerGCEnv and starts each paced run with room for what it
// allocates (roomFor), and counts the collections that still fall in one. GOGC=off also turns
// off the runtime's collection every two minutes (it hit a paced run at GOGC=1000): kube-apiserver
// collects when its heap nears the limit, and when roomFor makes it.
var apiServerGCEnv = []string{"GOGC=off", "GOMEMLIMIT=4GiB"}

// apiServerHeap is kube-apiserver's heap as its /metrics reports it (client_golang's Go
// collector), in bytes, and its collections so far.
type apiServerHeap struct {
	goal, alloc, allocated, collections float64
}

// room is what kube-apiserver can allocate before its next collection.
func (h apiServerHeap) room() float64 { return h.goal - h.alloc }

func readAPIServerHeap(ctx context.Context, rc rest.Interface) (apiServerHeap, error) {
	b, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiServerHeap{}, fmt.Errorf("read kube-apiserver's metrics: %w", err)
	}
	return heapIn(string(b))
}

// heapIn reads the heap's series from kube-apiserver's metrics text.
func heapIn(metrics string) (apiServerHeap, error) {
	var h apiServerHeap
	series := map[string]*float64{
		"go_gc_heap_goal_bytes":              &h.goal,
		"go_memstats_heap_alloc_bytes":       &h.alloc,
		"go_memstats_alloc_bytes_total":      &h.allocated,
		"go_gc_cycles_total_gc_cycles_total": &h.collections,
	}
	found := 0
	for line := range strings.SplitSeq(metrics, "\n") {
		name, value, ok := strings.Cut(line, " ")
		v, known := series[name]
		if !ok || !known {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return h, fmt.Errorf("kube-apiserver's metrics: %q: %w", line, err)
		}
		*v = f
		found++
	}
	if found != len(series) {
		return h, fmt.Errorf("kube-apiserver's metrics: %d of the heap's %d series (go_gc_heap_goal_bytes, go_memstats_heap_alloc_bytes, go_memstats_alloc_bytes_total, go_gc_cycles_total_gc_cycles_total)", found, len(series))
	}
	return h, nil
}

// roomFor returns kube-apiserver's heap once it can allocate need bytes before its next
// collection, or once a collection has run since the call (the most room its settings give).
// Until then it reads kube-apiserver's /metrics, which allocates there: a collection comes sooner.
func roomFor(ctx context.Context, rc rest.Interface, need float64) (apiServerHeap, error) {
	start, err := readAPIServerHeap(ctx, rc)
	if err != nil || start.room() >= need {
		return start, err
	}
	fmt.Fprintf(os.Stderr, "    making room in kube-apiserver's heap (%.0f MiB before its next collection, %.0f MiB wanted)…\n", start.room()/(1<<20), need/(1<<20))
	began := time.Now()
	deadline := began.Add(2 * time.Minute)
	defer func() { fmt.Fprintf(os.Stderr, "    made room in %s\n", time.Since(began).Round(time.Millisecond)) }()
	h := start
	for h.room() < need && h.collections == start.collections {
		if time.Now().After(deadline) {
			return h, fmt.Errorf("kube-apiserver did not collect its garbage in 2 minutes of reads (room %.0f MiB, %.0f MiB wanted)", h.room()/(1<<20), need/(1<<20))
		}
		if h, err = readAPIServerHeap(ctx, rc); err != nil {
			return h, err
		}
	}
	return h, nil
}
