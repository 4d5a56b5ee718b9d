package manager

import (
	"errors"
	"log/slog"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// DefaultGCPercent is the manager's GOGC. Its heap is mostly its cache, objects that live as
// long as the process: Go's default (100) lets the heap reach twice what is live before it
// collects, and at 10,000 objects that room was most of the manager's memory. 50 gives it half
// as much, for more frequent collections (at 10,000 objects 157 MiB of heap and stacks instead
// of 200, for 39% more CPU: docs/benchmarks.md, "Manager at scale").
const DefaultGCPercent = 50

// memoryLimitRatio is the share of a container's memory limit given to Go as its soft limit:
// the rest is for what Go does not count (the executable's pages, cgo, the kernel's buffers).
const memoryLimitRatio = 0.9

// TuneMemory applies the manager's memory policy where the environment does not set Go's own:
// GOGC defaults to DefaultGCPercent, and the memory limit of the container the process runs in
// (its cgroup) becomes Go's soft limit at 90% of it (GOMEMLIMIT, or AUTOMEMLIMIT=off, keeps
// Go's), so that near the limit the collector works harder before the kernel kills the
// process. limit says where the container's limit comes from (memlimit.FromCgroup in the
// binary). It returns the soft limit set, 0 for none.
func TuneMemory(getenv func(string) string, limit memlimit.Provider, log *slog.Logger) (int64, error) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	set, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithRatio(memoryLimitRatio), memlimit.WithProvider(limit), memlimit.WithLogger(log))
	if errors.Is(err, memlimit.ErrNoCgroup) || errors.Is(err, memlimit.ErrCgroupsNotSupported) {
		return 0, nil // not in a container: no limit to follow
	}
	return set, err
}
