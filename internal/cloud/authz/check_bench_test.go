package authz

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// BenchmarkCheck measures the access check every ARM and Key Vault call makes, for a principal
// with few and with many role assignments (the check scans the principal's assignments).
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("assignments=%d", n), func(b *testing.B) {
			st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			const sub = "/subscriptions/00000000-0000-0000-0000-000000000001"
			principal := uuid.NewString()
			err = st.Update(b.Context(), func(tx *store.Tx) error {
				// n-1 grants on other groups, then the one that matters, so the scan sees them all.
				for i := range n {
					scope := fmt.Sprintf("%s/resourceGroups/rg-%d", sub, i)
					role := Reader
					if i == n-1 {
						scope, role = sub+"/resourceGroups/target", Contributor
					}
					name := uuid.NewString()
					if _, _, err := PutTx(tx, Assignment{ID: AssignmentID(scope, name), Name: name, Scope: scope, RoleDefinitionID: role, PrincipalID: principal}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			a := New(st)
			target := sub + "/resourceGroups/target/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"
			b.ResetTimer()
			for b.Loop() {
				if err := a.Check(b.Context(), principal, "Microsoft.ManagedIdentity/userAssignedIdentities/write", target); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
