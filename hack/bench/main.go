// Command bench runs Cerulean's benchmarks, prints a table and writes it to docs/benchmarks.md.
//
// Each file in this package registers one section; `make bench` runs them all.
package main

import (
	"bytes"
	"context"
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
		rows, err := s.run(ctx, benchEnv{binDir: binDir, scratch: scratch})
		if err != nil {
			return fmt.Errorf("run %s: %w", s.title, err)
		}
		fmt.Fprintf(&doc, "\n## %s\n\n| benchmark | result | vs baseline |\n|---|---|---|\n", s.title)
		for _, r := range rows {
			fmt.Fprintf(&doc, "| %s | %s | %s |\n", r.benchmark, r.result, r.vsBaseline)
		}
	}
	fmt.Print(doc.String())
	if out == "" {
		return nil
	}
	return os.WriteFile(out, doc.Bytes(), 0o644) //nolint:gosec // a document in the repository, meant to be read
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
