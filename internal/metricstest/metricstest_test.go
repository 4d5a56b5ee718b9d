package metricstest_test

import (
	"testing"

	"github.com/cerulean/cerulean/internal/metricstest"
)

func TestSumMatchesEveryLabelGiven(t *testing.T) {
	body := `# TYPE reqs counter
reqs{code="200",verb="GET"} 3
reqs{code="200",verb="PUT"} 2
reqs{code="409",verb="PUT"} 1
reqs_total{code="200"} 100
plain 4
plain_count 9
`
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{nil, 6},
		{[]string{`code="200"`}, 5},
		{[]string{`code="200"`, `verb="PUT"`}, 2},
		{[]string{`verb="POST"`}, 0},
		{[]string{`code="20"`}, 0}, // a whole label, not a prefix
	} {
		if got := metricstest.Sum(body, "reqs", c.labels...); got != c.want {
			t.Errorf("Sum(reqs, %v) = %v, want %v", c.labels, got, c.want)
		}
	}
	// A series without labels: its name and a space, not a longer name.
	if got := metricstest.Sum(body, "plain"); got != 4 {
		t.Errorf("Sum(plain) = %v, want 4", got)
	}
	if got := metricstest.Sum(body, "plain", `code="200"`); got != 0 {
		t.Errorf("Sum(plain, code=200) = %v, want 0", got)
	}
}
