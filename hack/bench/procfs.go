package main

import (
	"os"
	"slices"
	"strconv"
	"strings"
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
