// Package store is the local cloud's durable state: one bbolt file, JSON values in named buckets.
//
// Every Update is one transaction that bbolt fsyncs before it returns, so a handler that answers
// 2xx only after Update returned nil never acknowledges a write that kill -9 could lose.
package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("not found")    // a key (or its bucket) does not exist
	ErrLocked   = errors.New("state locked") // another process (a running cloud) has the file open
)

// Store is an open state file. It is safe for concurrent use.
type Store struct {
	db      *bolt.DB
	path    string
	commits atomic.Uint64
}

// Open opens (creating if needed) the state file. It fails fast if another process holds it.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	before, _ := os.Stat(path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open state %s: %w (another process holds it)", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	// Rewrite puts a new file in place while holding its lock; a process that opened the old file
	// and got its lock once released would hold a file that is no longer the state.
	if after, err := os.Stat(path); err != nil || before != nil && !os.SameFile(before, after) {
		_ = db.Close()
		return nil, fmt.Errorf("open state %s: %w (another process replaced it)", path, ErrLocked)
	}
	// bbolt fsyncs the file, not its directory entry: sync the directory so a state file created
	// by this open survives a power loss too.
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Rewrite replaces the state file with a fresh copy of its live data, changed by fn in the
// copy's transaction. The old file's free pages, which still hold values since overwritten or
// deleted, do not come along: this is how a value that must not stay on disk (a secret an older
// version stored in clear) is removed for good. The copy takes the old file's place by a rename
// while its lock is held, so a crash leaves either the old state or the new one. Call it only
// while nothing else uses the store (a cloud's start, before it serves).
func (s *Store) Rewrite(ctx context.Context, fn func(*Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp := s.path + ".rewrite"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale copy of state: %w", err)
	}
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("create copy of state: %w", err)
	}
	placed := false
	defer func() {
		if !placed {
			_ = dst.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := bolt.Compact(dst, s.db, 0); err != nil {
		return fmt.Errorf("copy state: %w", err)
	}
	if err := dst.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) }); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("replace state: %w", err)
	}
	placed = true
	old := s.db
	s.db = dst
	s.commits.Add(1)
	return errors.Join(syncDir(filepath.Dir(s.path)), old.Close())
}

// Close releases the file lock.
func (s *Store) Close() error { return s.db.Close() }

// Commits counts successful write transactions; tests use it to prove a request wrote nothing.
func (s *Store) Commits() uint64 { return s.commits.Load() }

// View runs fn in a read-only transaction.
func (s *Store) View(ctx context.Context, fn func(*Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
}

// Update runs fn in a read-write transaction; the changes are on disk when it returns nil, and
// none of them are when fn returns an error.
func (s *Store) Update(ctx context.Context, fn func(*Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx: tx}) })
	if err == nil {
		s.commits.Add(1)
	}
	return err
}

// Tx is one transaction. Values are stored as JSON.
type Tx struct{ tx *bolt.Tx }

// Get decodes the value at bucket/key into v, or returns ErrNotFound.
func (t *Tx) Get(bucket, key string, v any) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return ErrNotFound
	}
	raw := b.Get([]byte(key))
	if raw == nil {
		return ErrNotFound
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Put stores v at bucket/key, creating the bucket if needed.
func (t *Tx) Put(bucket, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", bucket, key, err)
	}
	b, err := t.tx.CreateBucketIfNotExists([]byte(bucket))
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	if err := b.Put([]byte(key), raw); err != nil {
		return fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Delete removes bucket/key; deleting what does not exist is not an error.
func (t *Tx) Delete(bucket, key string) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// ForEach calls fn for every key with the given prefix, in key order; decode unmarshals the value.
// fn must not write to the same bucket.
func (t *Tx) ForEach(bucket, prefix string, fn func(key string, decode func(v any) error) error) error {
	b := t.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		raw := v
		key := string(k)
		decode := func(out any) error {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucket, key, err)
			}
			return nil
		}
		if err := fn(key, decode); err != nil {
			return err
		}
	}
	return nil
}
