package arm

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// TestOperationResumesAfterRestart: a delete left in progress by a stop (or crash) runs to the
// end at the next Start, taking what the group holds and its role assignments.
func TestOperationResumesAfterRestart(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const (
		sub = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590"
		rg  = sub + "/resourceGroups/rg"
		mi  = rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"
	)
	hooked := false
	svc := New(Options{Store: st, Authz: authz.New(st), SubscriptionID: "0b1f6471-1bf0-4dda-aec3-cb9272f09590"})
	svc.OnDelete("Microsoft.ManagedIdentity/userAssignedIdentities", func(*store.Tx, Resource) error { hooked = true; return nil })
	op := Operation{ID: "op1", Kind: opDelete, Target: rg, Status: OpInProgress, Started: time.Now()}
	err = st.Update(ctx, func(tx *store.Tx) error {
		for _, r := range []Resource{
			{ID: rg, Name: "rg", Type: "Microsoft.Resources/resourceGroups", Properties: []byte(`{"provisioningState":"Deleting"}`)},
			{ID: mi, Name: "app", Type: "Microsoft.ManagedIdentity/userAssignedIdentities"},
			{ID: sub + "/resourceGroups/rg2", Name: "rg2", Type: "Microsoft.Resources/resourceGroups"},
		} {
			if err := PutTx(tx, r); err != nil {
				return err
			}
		}
		if _, _, err := authz.PutTx(tx, authz.Assignment{ID: authz.AssignmentID(mi, "a"), Name: "a", Scope: mi, RoleDefinitionID: authz.Reader, PrincipalID: "p"}); err != nil {
			return err
		}
		return tx.Put(bucketOperations, op.ID, op)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := svc.operation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == OpSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation still %s", got.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	svc.Close()
	_ = st.View(ctx, func(tx *store.Tx) error {
		for _, id := range []string{rg, mi} {
			pid, _ := armid.Parse(id)
			if _, err := GetTx(tx, pid); err == nil {
				t.Errorf("%s survived the resumed delete", id)
			}
		}
		other, _ := armid.Parse(sub + "/resourceGroups/rg2")
		if _, err := GetTx(tx, other); err != nil {
			t.Errorf("the other group: %v", err)
		}
		if _, err := authz.GetTx(tx, authz.AssignmentID(mi, "a")); !errors.Is(err, authz.ErrNotFound) {
			t.Errorf("the identity's role assignment survived: %v", err)
		}
		return nil
	})
	if !hooked {
		t.Error("the identity's delete hook did not run")
	}
}
