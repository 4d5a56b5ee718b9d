package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func init() {
	register(section{title: "Go benchmarks (hot paths)", run: benchGo})
}

// benchGo runs the repository's Go benchmarks (go test -bench) and reports ns/op. Within a
// family of sub-benchmarks the first one is the baseline the others are compared with.
func benchGo(ctx context.Context, _ benchEnv) ([]row, error) {
	pkgs, err := benchmarkPackages(".")
	if err != nil {
		return nil, err
	}
	// Only the packages that have benchmarks: the others' TestMain may start a control plane.
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", "2s"}, pkgs...)
	out, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go test -bench: %w\n%s", err, out)
	}
	var rows []row
	baselines := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// BenchmarkName-CPUS  N  ns/op-value ns/op  [value unit]... (own metrics, B/op, allocs/op)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		name := f[0][:strings.LastIndexByte(f[0], '-')]
		family, _, _ := strings.Cut(name, "/")
		result := fmt.Sprintf("%s/op", formatNanos(ns))
		for i := 4; i+1 < len(f); i += 2 { // B/op, allocs/op and the benchmark's own metrics
			result += fmt.Sprintf(", %s %s", f[i], f[i+1])
		}
		r := row{benchmark: name, result: result}
		if base, ok := baselines[family]; ok {
			r.vsBaseline = ratio(ns, base)
		} else if strings.Contains(name, "/") {
			baselines[family] = ns
			r.vsBaseline = "baseline"
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// benchmarkPackages lists the package directories under root whose tests define a benchmark.
func benchmarkPackages(root string) ([]string, error) {
	fsys := os.DirFS(root)
	seen := map[string]bool{}
	var pkgs []string
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "hack" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) {
			return fs.SkipDir
		}
		dir := filepath.Dir(path)
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || seen[dir] {
			return nil
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("\nfunc Benchmark")) {
			seen[dir] = true
			pkgs = append(pkgs, "./"+dir)
		}
		return nil
	})
	return pkgs, err
}

func formatNanos(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
