package testenv_test

import (
	"testing"

	"github.com/cerulean/cerulean/internal/testenv"
)

// recorder is a testing.TB that records how a test was stopped instead of stopping.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skip(...any)           { r.skipped = true }

// A missing tool fails the test under CI=true and skips it elsewhere.
func TestMissingFailsInCI(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		testenv.Tools(r, "nothing", "cerulean-no-such-tool")
		if got, want := r.failed, ci == "true"; got != want || r.skipped == want {
			t.Errorf("CI=%q: failed=%v skipped=%v, want failed=%v", ci, r.failed, r.skipped, want)
		}
	}
	r := &recorder{TB: t}
	testenv.Tools(r, "nothing", "sh")
	if r.failed || r.skipped {
		t.Errorf("a present tool stopped the test: failed=%v skipped=%v", r.failed, r.skipped)
	}
}
