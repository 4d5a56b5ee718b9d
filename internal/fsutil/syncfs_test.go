package fsutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cerulean/cerulean/internal/fsutil"
)

func TestSyncFS(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.SyncFS(dir); err != nil {
		t.Fatalf("SyncFS of a directory: %v", err)
	}
	missing := filepath.Join(dir, "missing")
	if err := fsutil.SyncFS(missing); err == nil {
		t.Fatal("SyncFS of a missing directory: no error")
	}
}
