package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"
)

// PlanesOptions configure StartPlanes.
type PlanesOptions struct {
	// DataDirs has one data directory per control plane; each resumes like Start's.
	DataDirs []string
	// Names label each plane's progress lines ("NAME: starting etcd…"); empty means the base name
	// of its data directory.
	Names []string
	// BinDir as in Options.
	BinDir string
	// Progress receives each plane's progress lines, prefixed with its name, and one line when it
	// is ready; nil discards them.
	Progress io.Writer
	// ReadyTimeout as in Options.
	ReadyTimeout time.Duration
}

// StartPlanes starts several control planes at once, each with its own CA, service-account
// issuer and ports, and returns them in the order of DataDirs once all are ready, or an error
// after stopping every one it started. The caller stops them (StopPlanes).
func StartPlanes(ctx context.Context, opts PlanesOptions) ([]*ControlPlane, error) {
	n := len(opts.DataDirs)
	if opts.Names != nil && len(opts.Names) != n {
		return nil, fmt.Errorf("start control planes: %d names for %d data directories", len(opts.Names), n)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	shared := &lockedWriter{w: progress}
	planes := make([]*ControlPlane, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, dir := range opts.DataDirs {
		name := filepath.Base(dir)
		if opts.Names != nil {
			name = opts.Names[i]
		}
		wg.Go(func() {
			began := time.Now()
			out := &prefixWriter{w: shared, prefix: name + ": "}
			planes[i], errs[i] = Start(ctx, Options{DataDir: dir, BinDir: opts.BinDir, Progress: out, ReadyTimeout: opts.ReadyTimeout})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", name, errs[i])
				return
			}
			fmt.Fprintf(out, "ready at %s (%s)\n", planes[i].APIServerURL, time.Since(began).Round(100*time.Millisecond))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		StopPlanes(planes)
		return nil, fmt.Errorf("start control planes: %w", err)
	}
	return planes, nil
}

// StopPlanes stops the planes at once; nil entries are skipped.
func StopPlanes(planes []*ControlPlane) {
	var wg sync.WaitGroup
	for _, cp := range planes {
		if cp != nil {
			wg.Go(cp.Stop)
		}
	}
	wg.Wait()
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter writes each complete line with a prefix, in one write.
type prefixWriter struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
	}
}
