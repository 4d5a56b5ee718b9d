package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// hostLock is the machine-wide node lock.
type hostLock struct{ f *os.File }

// lockHost takes the machine's node lock, waiting up to wait for another node to stop.
func lockHost(ctx context.Context, wait time.Duration, progress func(string)) (*hostLock, error) {
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return nil, fmt.Errorf("lock the node: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(hostDir, hostLockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the node: %w", err)
	}
	deadline := time.Now().Add(wait)
	announced := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &hostLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock the node: %w", err)
		}
		owner := "unknown"
		if r, rerr := readHostRecord(); rerr == nil && r != nil {
			owner = fmt.Sprintf("pid %d, data directory %s", r.PID, r.DataDir)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("%w (%s): stop it first, or run without a node", ErrNodeInUse, owner)
		}
		if !announced {
			progress(fmt.Sprintf("waiting for the node of another cerulean (%s) to stop…", owner))
			announced = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("lock the node: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (l *hostLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// WithNodeLock runs f holding the machine's node lock (waiting up to wait for a running node to
// stop), so that no node starts meanwhile: tests read or clean machine-wide state in it.
func WithNodeLock(ctx context.Context, wait time.Duration, f func()) error {
	l, err := lockHost(ctx, wait, func(string) {})
	if err != nil {
		return err
	}
	defer l.release()
	f()
	return nil
}

// RecordedSysctls are the values the running node found its sysctls at, under the node lock,
// and restores when it stops; nil when no node runs.
func RecordedSysctls() (map[string]string, error) {
	r, err := readHostRecord()
	if err != nil || r == nil {
		return nil, err
	}
	return r.Sysctls, nil
}
