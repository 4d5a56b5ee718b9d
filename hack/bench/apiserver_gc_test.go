package main

import (
	"strings"
	"testing"
)

// The bench reads kube-apiserver's heap from the Go collector's series in its /metrics (as
// kube-apiserver prints them: exponents included), and a missing one is an error, not a zero room.
func TestHeapInReadsKubeAPIServersHeap(t *testing.T) {
	metrics := `# HELP go_gc_heap_goal_bytes Heap size target percentage configured by the user, otherwise 100.
# TYPE go_gc_heap_goal_bytes gauge
go_gc_heap_goal_bytes 1.8481481e+08
go_gc_heap_live_bytes 9.0232392e+07
go_memstats_heap_alloc_bytes 1.00474976e+08
go_memstats_alloc_bytes 1.00474976e+08
go_memstats_alloc_bytes_total 4.05431984e+08
go_gc_cycles_total_gc_cycles_total 15
go_gc_cycles_forced_gc_cycles_total 0
`
	h, err := heapIn(metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := apiServerHeap{goal: 184814810, alloc: 100474976, allocated: 405431984, collections: 15}
	if h != want {
		t.Fatalf("heapIn = %+v, want %+v", h, want)
	}
	if got := h.room(); got != 184814810-100474976 {
		t.Errorf("room = %v", got)
	}
	if _, err := heapIn(strings.ReplaceAll(metrics, "go_gc_cycles_total_gc_cycles_total 15\n", "")); err == nil || !strings.Contains(err.Error(), "3 of the heap's 4 series") {
		t.Errorf("without the collections' series: %v, want an error naming what is missing", err)
	}
	if _, err := heapIn(strings.Replace(metrics, "go_gc_heap_goal_bytes 1.8481481e+08", "go_gc_heap_goal_bytes x", 1)); err == nil {
		t.Error("an unreadable value was taken as a size")
	}
}
