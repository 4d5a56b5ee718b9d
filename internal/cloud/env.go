package cloud

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FormatEnv renders NAME=VALUE lines as the shell exports `cerulean-local cloud env` prints.
func FormatEnv(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("export ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// ReadEnv returns the exports a cloud with this data directory wrote when it became ready. It
// reads a file rather than the state, which the running cloud holds locked.
func ReadEnv(dataDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, EnvFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no cloud has started with data dir %s (run `cerulean-local cloud --data-dir %s` first): %w", dataDir, dataDir, err)
	}
	if err != nil {
		return "", fmt.Errorf("read env: %w", err)
	}
	return string(b), nil
}
