package fsutil

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// SyncFS flushes every written file of the file system that holds dir (syncfs(2)): one flush
// where fsyncing a tree's thousand files one by one waits for the disk a thousand times.
func SyncFS(dir string) error {
	f, err := os.Open(dir) //nolint:gosec // a directory of the caller's own
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
