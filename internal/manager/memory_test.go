package manager_test

import (
	"log/slog"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/cerulean/cerulean/internal/manager"
)

// gcPercent reads GOGC as the runtime has it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// withoutGoMemoryEnv runs the test as a process started without GOMEMLIMIT, and puts back the
// collector's settings after it.
func withoutGoMemoryEnv(t *testing.T) {
	t.Helper()
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		_ = os.Unsetenv("GOMEMLIMIT")
		t.Cleanup(func() { _ = os.Setenv("GOMEMLIMIT", v) })
	}
	gc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(gc); debug.SetMemoryLimit(limit) })
}

func TestTuneMemory(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	noEnv := func(string) string { return "" }
	const gib = 1 << 30
	limit := float64(gib)
	ninetyPercent := int64(limit * 0.9) // as the runtime gets it, rounded down

	t.Run("in a container with a limit", func(t *testing.T) {
		withoutGoMemoryEnv(t)
		set, err := manager.TuneMemory(noEnv, memlimit.Limit(gib), quiet)
		if err != nil {
			t.Fatal(err)
		}
		if want := ninetyPercent; set != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("soft limit %d (runtime %d), want 90%% of the container's, %d", set, debug.SetMemoryLimit(-1), want)
		}
		if got := gcPercent(); got != manager.DefaultGCPercent {
			t.Errorf("GOGC %d, want %d", got, manager.DefaultGCPercent)
		}
	})

	t.Run("GOGC set by the user is kept", func(t *testing.T) {
		withoutGoMemoryEnv(t)
		debug.SetGCPercent(200) // what the runtime read from GOGC=200
		if _, err := manager.TuneMemory(func(k string) string { return map[string]string{"GOGC": "200"}[k] }, memlimit.Limit(gib), quiet); err != nil {
			t.Fatal(err)
		}
		if got := gcPercent(); got != 200 {
			t.Errorf("GOGC %d, want the user's 200", got)
		}
	})

	t.Run("GOMEMLIMIT set by the user is kept", func(t *testing.T) {
		withoutGoMemoryEnv(t)
		t.Setenv("GOMEMLIMIT", "300MiB")
		debug.SetMemoryLimit(300 << 20) // what the runtime read from it
		if _, err := manager.TuneMemory(noEnv, memlimit.Limit(gib), quiet); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != 300<<20 {
			t.Errorf("soft limit %d, want the user's %d", got, 300<<20)
		}
	})

	t.Run("outside a container", func(t *testing.T) {
		withoutGoMemoryEnv(t)
		before := debug.SetMemoryLimit(-1)
		noCgroup := func() (uint64, error) { return 0, memlimit.ErrNoCgroup }
		set, err := manager.TuneMemory(noEnv, noCgroup, quiet)
		if err != nil || set != 0 {
			t.Fatalf("TuneMemory = %d, %v; want no limit and no error", set, err)
		}
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("soft limit changed to %d", got)
		}
		if got := gcPercent(); got != manager.DefaultGCPercent {
			t.Errorf("GOGC %d, want %d", got, manager.DefaultGCPercent)
		}
	})
}
