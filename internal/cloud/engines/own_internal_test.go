package engines

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Giving a data directory to the engine's user skips an entry that vanished since its directory
// was read (a temporary file renamed into place by a write beside the walk: CI once failed a
// firewall rule added while PostgreSQL started), and still fails on any other error.
func TestOwnEntrySkipsEntriesGoneDuringTheWalk(t *testing.T) {
	a := &account{uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	gone := filepath.Join(t.TempDir(), ".pg_hba.conf.123")
	if err := a.ownEntry(gone, nil, nil); err != nil {
		t.Errorf("an entry removed before its chown: %v, want it skipped", err)
	}
	if err := a.ownEntry(gone, nil, &fs.PathError{Op: "lstat", Path: gone, Err: fs.ErrNotExist}); err != nil {
		t.Errorf("an entry the walk could not lstat, gone: %v, want it skipped", err)
	}
	denied := &fs.PathError{Op: "open", Path: gone, Err: fs.ErrPermission}
	if err := a.ownEntry(gone, nil, denied); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("a directory the walk could not read: %v, want the error", err)
	}
	kept := filepath.Join(t.TempDir(), "pg_hba.conf")
	if err := os.WriteFile(kept, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.ownEntry(kept, nil, nil); err != nil {
		t.Errorf("an entry that is there: %v", err)
	}
}
