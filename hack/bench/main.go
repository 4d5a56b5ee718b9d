// Command bench runs Cerulean's benchmarks, prints a table and writes it to docs/benchmarks.md.
//
// Each file in this package registers one section; `make bench` runs them all.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// row is one line of the table. vsBaseline is a ratio against a baseline measured in the same run,
// empty where none exists.
type row struct {
	benchmark, result, vsBaseline string
}

// section is one group of rows.
type section struct {
	title string
	run   func(ctx context.Context, env benchEnv) ([]row, error)
}

// benchEnv is what every section gets: where the repository's binaries are and a scratch directory.
type benchEnv struct {
	binDir, scratch string
}

var sections []section

func register(s section) { sections = append(sections, s) }

func main() {
	if kind := os.Getenv(benchWebhookEnv); kind != "" {
		// The bench runs itself as a webhook process (workload_identity_servers.go).
		if err := serveBenchWebhook(kind); err != nil {
			fmt.Fprintln(os.Stderr, "bench webhook:", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "docs/benchmarks.md", "where to write the table (empty: print only)")
	only := flag.String("only", "", "run only the sections whose title matches this regexp")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, out, only string) error {
	filter, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("parse -only: %w", err)
	}
	binDir, err := filepath.Abs("bin")
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "cerulean-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)

	var doc bytes.Buffer
	fmt.Fprintf(&doc, "# Benchmarks\n\nWritten by `make bench` on %s.\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&doc, "Machine: %d cores, %s; %s.\n", runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Fprintf(&doc, "Versions: %s.\n", versions(binDir))
	fmt.Fprintf(&doc, "\nOne run, client and server on the same machine: compare a row with its baseline from the same run\n"+
		"rather than absolute numbers across runs. Load rows are bounded in requests and time.\n")
	for _, s := range sections {
		if !filter.MatchString(s.title) {
			continue
		}
		fmt.Fprintf(os.Stderr, "running %s…\n", s.title)
		loadBefore := loadAverage()
		rows, err := s.run(ctx, benchEnv{binDir: binDir, scratch: scratch})
		if err != nil {
			return fmt.Errorf("run %s: %w", s.title, err)
		}
		rows = append(rows, row{benchmark: "machine load (1-minute average) at the section's start, at its end",
			result: loadBefore + ", " + loadAverage()})
		fmt.Fprintf(&doc, "\n## %s\n\n| benchmark | result | vs baseline |\n|---|---|---|\n", s.title)
		for _, r := range rows {
			fmt.Fprintf(&doc, "| %s | %s | %s |\n", r.benchmark, r.result, r.vsBaseline)
		}
	}
	fmt.Print(doc.String())
	if out == "" {
		return nil
	}
	text := doc.String()
	if only != "" {
		// A partial run replaces its own sections and keeps the others' last measurements.
		old, err := os.ReadFile(out) //nolint:gosec // the document the flag names
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		text = replaceSections(string(old), text)
	}
	return os.WriteFile(out, []byte(text), 0o644) //nolint:gosec // a document in the repository, meant to be read
}

// replaceSections returns doc with the table of each "## " section of fresh in place of the
// table of doc's section of the same title (a new section is appended); doc's header, its other
// sections and the prose around the tables stay.
func replaceSections(doc, fresh string) string {
	if doc == "" {
		return fresh
	}
	split := func(s string) (string, []string) {
		parts := strings.Split(s, "\n## ")
		return parts[0], parts[1:]
	}
	title := func(section string) string { return strings.SplitN(section, "\n", 2)[0] }
	head, sections := split(doc)
	_, updates := split(fresh)
	for _, u := range updates {
		replaced := false
		for i, s := range sections {
			if title(s) == title(u) {
				sections[i], replaced = replaceTable(s, u), true
			}
		}
		if !replaced {
			sections = append(sections, u)
		}
	}
	out := head
	for _, s := range sections {
		out = strings.TrimRight(out, "\n") + "\n\n## " + s
	}
	return strings.TrimRight(out, "\n") + "\n"
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAverage is the machine's 1-minute load average, so that each section's figures say how
// busy the machine was: absolute numbers on a shared 2-core machine vary several times over.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	first, _, _ := strings.Cut(string(b), " ")
	return first
}

// versions names the binaries the numbers were measured with.
func versions(binDir string) string {
	var parts []string
	for _, tool := range []struct{ name, flag string }{
		{"cerulean", "version"}, {"kube-apiserver", "--version"}, {"etcd", "--version"},
	} {
		b, err := exec.Command(filepath.Join(binDir, tool.name), tool.flag).Output()
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		parts = append(parts, first)
	}
	return strings.Join(parts, "; ")
}

// ratio renders value/baseline for the vs-baseline column.
func ratio(value, baseline float64) string {
	if baseline == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", value/baseline)
}

// replaceTable returns section with its first table (a run of lines starting with '|') replaced
// by fresh's.
func replaceTable(section, fresh string) string {
	table := func(s string) (lines []string, start, end int) {
		lines = strings.Split(s, "\n")
		start = len(lines)
		for i, l := range lines {
			if strings.HasPrefix(l, "|") {
				start = i
				break
			}
		}
		end = start
		for end < len(lines) && strings.HasPrefix(lines[end], "|") {
			end++
		}
		return lines, start, end
	}
	old, s0, s1 := table(section)
	nw, f0, f1 := table(fresh)
	out := append(append(append([]string{}, old[:s0]...), nw[f0:f1]...), old[s1:]...)
	return strings.Join(out, "\n")
}
