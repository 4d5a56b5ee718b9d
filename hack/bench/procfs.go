package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What the sections read of processes in /proc (proc(5)).

// statFields are the fields of /proc/PID/stat after the command's name (which may hold spaces
// and ends with ")"): the parent's pid is [1], utime and stime [11] and [12], the waited-for
// children's cutime and cstime [13] and [14]. nil when pid is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok {
		return nil
	}
	return strings.Fields(rest)
}

// procKiB reads the "key: N kB" lines of /proc/PID/file (status, smaps_rollup) for keys; a key
// not found, or pid gone, is absent from the answer.
func procKiB(pid int, file string, keys ...string) map[string]int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, v, _ := strings.Cut(line, ":")
		if !slices.Contains(keys, name) {
			continue
		}
		if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
			out[name] = kb
		}
	}
	return out
}

// processCPU is pid's user and system CPU time so far (in the kernel's 100 ticks a second); 0
// when pid is gone.
func processCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// processOf is the pid of the one running process of executable exe.
func processOf(exe string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	found := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if path, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); path == exe {
			if found != 0 {
				return 0, fmt.Errorf("more than one %s runs (pids %d and %d)", exe, found, pid)
			}
			found = pid
		}
	}
	if found == 0 {
		return 0, fmt.Errorf("no %s runs", exe)
	}
	return found, nil
}
