// Package examplechart is the example application chart for `cerulean rollout`: the test-app
// image reading one Key Vault secret with its workload identity. The rollout tests deploy it,
// and `cerulean-local up --clusters` writes it next to its example rollout file.
package examplechart

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

//go:embed all:app
var files embed.FS

// Dir is the chart's directory in the source tree (tests).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "app")
}

// Write writes the chart into dir (created if missing), replacing the chart's files there.
func Write(dir string) error {
	err := fs.WalkDir(files, "app", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel("app", path)
		if err != nil {
			return err
		}
		out := filepath.Join(dir, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o750)
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o600)
	})
	if err != nil {
		return fmt.Errorf("write example chart: %w", err)
	}
	return nil
}
