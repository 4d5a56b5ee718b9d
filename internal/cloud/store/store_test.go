package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type item struct{ Name string }

func TestPutGetReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx *Tx) error { return tx.Get("b", "k", &item{}) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing bucket: got %v, want ErrNotFound", err)
	}
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if err := s.Update(ctx, func(tx *Tx) error { return tx.Put("b", k, item{Name: k}) }); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx *Tx) error {
		if err := tx.Put("b", "a/3", item{}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if got := s.Commits(); got != 3 {
		t.Fatalf("commits = %d, want 3", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	if err := s.View(ctx, func(tx *Tx) error {
		return tx.ForEach("b", "a/", func(_ string, decode func(any) error) error {
			var it item
			if err := decode(&it); err != nil {
				return err
			}
			names = append(names, it.Name)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] != "a/1" || names[1] != "a/2" {
		t.Fatalf("prefix scan = %v (the rolled-back a/3 must be absent)", names)
	}
	if err := s.Update(ctx, func(tx *Tx) error { return tx.Delete("b", "a/1") }); err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx *Tx) error { return tx.Get("b", "a/1", &item{}) }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted key: got %v", err)
	}
}

func TestSecondOpenFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Open(ctx, path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open of a locked state file: got %v, want ErrLocked", err)
	}
}

// TestRewriteLeavesNoOldValue: a value overwritten by Update stays in the file's free pages;
// Rewrite copies only live data, so the old value is gone from the bytes on disk, the rest is
// intact, the store keeps working, and it still holds the lock.
func TestRewriteLeavesNoOldValue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const old = "old-value-that-must-go-4f1c9a"
	for k, v := range map[string]string{"keep": "kept", "secret": old} {
		if err := s.Update(ctx, func(tx *Tx) error { return tx.Put("b", k, item{Name: v}) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx *Tx) error { return tx.Put("b", "secret", item{Name: "new"}) }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(old)) {
		t.Fatal("the overwritten value is not in the file after Update: this test shows nothing")
	}

	if err := s.Rewrite(ctx, func(tx *Tx) error { return tx.Put("b", "added", item{Name: "in the copy"}) }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(old)) {
		t.Error("the overwritten value is still in the file after Rewrite")
	}
	if _, err := os.Stat(path + ".rewrite"); !os.IsNotExist(err) {
		t.Errorf("the copy is left behind: %v", err)
	}
	if err := s.Update(ctx, func(tx *Tx) error { return tx.Put("b", "after", item{Name: "after"}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, path); !errors.Is(err, ErrLocked) {
		t.Errorf("second open after Rewrite: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for k, want := range map[string]string{"keep": "kept", "secret": "new", "added": "in the copy", "after": "after"} {
		var got item
		if err := s2.View(ctx, func(tx *Tx) error { return tx.Get("b", k, &got) }); err != nil || got.Name != want {
			t.Errorf("%s = %q (%v), want %q", k, got.Name, err, want)
		}
	}
}
