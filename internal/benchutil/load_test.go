package benchutil

import (
	"testing"
	"time"
)

func TestMedianTakesEachPercentilesMiddleRunAndTotals(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	got := Median([]Result{
		{Concurrency: 16, Requests: 100, Errors: 1, Elapsed: time.Second, P50: ms(5), P99: ms(300)}, // an outlier round at p99
		{Concurrency: 16, Requests: 100, Elapsed: time.Second, P50: ms(7), P99: ms(20)},
		{Concurrency: 16, Requests: 100, Elapsed: 2 * time.Second, P50: ms(6), P99: ms(18)},
	})
	want := Result{Concurrency: 16, Requests: 300, Errors: 1, Elapsed: 4 * time.Second, P50: ms(6), P99: ms(20)}
	if got != want {
		t.Errorf("Median = %+v, want %+v", got, want)
	}
	if (Median(nil) != Result{}) {
		t.Error("the median of no runs is not the zero result")
	}
}
