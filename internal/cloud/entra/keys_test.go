package entra

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// TestKeyRingReloadKeepsSigner: after rotations at one instant (a clock that does not move), a
// reloaded ring signs with the newest key and still publishes the retired ones.
func TestKeyRingReloadKeepsSigner(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	ring, err := newKeyRing(ctx, st, clock, 24*time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := ring.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ring.signer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := newKeyRing(ctx, st, clock, 24*time.Hour, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := again.signer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID {
			t.Fatalf("reloaded ring signs with %s, want %s", got.ID, want.ID)
		}
		if n := len(again.published()); n != 4 {
			t.Fatalf("published %d keys, want 4", n)
		}
	}
	now = now.Add(time.Hour + time.Second)
	if n := len(ring.published()); n != 1 {
		t.Fatalf("after the keep period, published %d keys, want 1", n)
	}
}
