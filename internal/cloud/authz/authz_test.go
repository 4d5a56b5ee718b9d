package authz

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, action string
		want            bool
	}{
		{"*", "Microsoft.Resources/subscriptions/resourceGroups/write", true},
		{"*/read", "Microsoft.Resources/subscriptions/resourceGroups/read", true},
		{"*/read", "Microsoft.Resources/subscriptions/resourceGroups/write", false},
		{"Microsoft.Authorization/*/Write", "Microsoft.Authorization/roleAssignments/write", true},
		{"Microsoft.Authorization/*", "Microsoft.Authorization/roleAssignments/delete", true},
		{"Microsoft.Authorization/*", "Microsoft.AuthorizationX/a", false},
		{"Microsoft.ManagedIdentity/userAssignedIdentities/*/read", "Microsoft.ManagedIdentity/userAssignedIdentities/read", true},
		{"Microsoft.ManagedIdentity/userAssignedIdentities/*/read", "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/read", true},
		{"Microsoft.ManagedIdentity/userAssignedIdentities/*/read", "Microsoft.ManagedIdentity/userAssignedIdentities/write", false},
		{"Microsoft.KeyVault/vaults/secrets/*", "Microsoft.KeyVault/vaults/secrets/getSecret/action", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
	} {
		if got := Match(tc.pattern, tc.action); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.pattern, tc.action, got)
		}
	}
}

func TestBuiltInActionSets(t *testing.T) {
	role := func(id string) RoleDefinition {
		r, ok := RoleByID(id)
		if !ok {
			t.Fatalf("no role %s", id)
		}
		return r
	}
	const (
		raWrite  = "Microsoft.Authorization/roleAssignments/write"
		miWrite  = "Microsoft.ManagedIdentity/userAssignedIdentities/write"
		miRead   = "Microsoft.ManagedIdentity/userAssignedIdentities/read"
		rgRead   = "Microsoft.Resources/subscriptions/resourceGroups/read"
		getSec   = "Microsoft.KeyVault/vaults/secrets/getSecret/action"
		setSec   = "Microsoft.KeyVault/vaults/secrets/setSecret/action"
		miAssign = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"
	)
	for _, tc := range []struct {
		role           string
		allow, deny    []string
		dataA, dataDen []string
	}{
		{role: Owner, allow: []string{raWrite, miWrite, rgRead}, dataDen: []string{getSec}},
		{role: Contributor, allow: []string{miWrite, rgRead}, deny: []string{raWrite, "Microsoft.Authorization/roleAssignments/delete"}, dataDen: []string{getSec}},
		{role: Reader, allow: []string{miRead, rgRead, "Microsoft.Authorization/roleAssignments/read"}, deny: []string{miWrite, raWrite}},
		{role: UserAccessAdministrator, allow: []string{raWrite, rgRead}, deny: []string{miWrite}},
		{role: ManagedIdentityOperator, allow: []string{miRead, miAssign, rgRead}, deny: []string{miWrite, raWrite}},
		{role: KeyVaultSecretsUser, deny: []string{miRead}, dataA: []string{getSec}, dataDen: []string{setSec}},
		{role: KeyVaultSecretsOfficer, allow: []string{"Microsoft.KeyVault/vaults/read"}, dataA: []string{getSec, setSec}},
		{role: KeyVaultAdministrator, dataA: []string{getSec, setSec, "Microsoft.KeyVault/vaults/keys/read"}},
		{role: KeyVaultCryptoOfficer, dataA: []string{"Microsoft.KeyVault/vaults/keys/create/action", "Microsoft.KeyVault/vaults/keys/purge/action", "Microsoft.KeyVault/vaults/keyrotationpolicies/write"}, dataDen: []string{getSec}},
		{role: KeyVaultCryptoUser, dataA: []string{"Microsoft.KeyVault/vaults/keys/sign/action", "Microsoft.KeyVault/vaults/keys/unwrap/action"}, dataDen: []string{"Microsoft.KeyVault/vaults/keys/create/action", getSec}},
		{role: KeyVaultCryptoServiceEncryptionUser, dataA: []string{"Microsoft.KeyVault/vaults/keys/wrap/action", "Microsoft.KeyVault/vaults/keys/unwrap/action"}, dataDen: []string{"Microsoft.KeyVault/vaults/keys/sign/action"}},
		{role: KeyVaultCertificatesOfficer, allow: []string{"Microsoft.KeyVault/vaults/read"}, dataA: []string{"Microsoft.KeyVault/vaults/certificates/create/action"}, dataDen: []string{getSec, "Microsoft.KeyVault/vaults/keys/read"}},
		{role: KeyVaultCertificateUser, dataA: []string{"Microsoft.KeyVault/vaults/certificates/read", getSec, "Microsoft.KeyVault/vaults/keys/read"}, dataDen: []string{"Microsoft.KeyVault/vaults/certificates/create/action"}},
	} {
		r := role(tc.role)
		for _, a := range tc.allow {
			if !r.Allows(a) {
				t.Errorf("%s does not allow %s", r.RoleName, a)
			}
		}
		for _, a := range tc.deny {
			if r.Allows(a) {
				t.Errorf("%s allows %s", r.RoleName, a)
			}
		}
		for _, a := range tc.dataA {
			if !r.AllowsData(a) {
				t.Errorf("%s does not allow data action %s", r.RoleName, a)
			}
		}
		for _, a := range tc.dataDen {
			if r.AllowsData(a) {
				t.Errorf("%s allows data action %s", r.RoleName, a)
			}
		}
	}
	if r, ok := RoleByName("managed identity operator"); !ok || r.ID != ManagedIdentityOperator {
		t.Error("RoleByName is not case-insensitive")
	}
	if got := RoleIDFromDefinitionID("/subscriptions/s/providers/Microsoft.Authorization/roleDefinitions/" + Reader); got != Reader {
		t.Errorf("RoleIDFromDefinitionID = %q", got)
	}
	if got := RoleIDFromDefinitionID("/subscriptions/s/providers/Microsoft.Other/roleDefinitions/" + Reader); got != "" {
		t.Errorf("RoleIDFromDefinitionID of another type = %q", got)
	}
}

func TestAssignments(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	az := New(st)
	const (
		sub = "/subscriptions/s"
		rg  = sub + "/resourceGroups/RG"
		mi  = rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"
		pid = "p1"
	)
	put := func(scope, name, role string) error {
		return st.Update(ctx, func(tx *store.Tx) error {
			_, _, err := PutTx(tx, Assignment{ID: AssignmentID(scope, name), Name: name, Scope: scope, RoleDefinitionID: role, PrincipalID: pid})
			return err
		})
	}
	if err := az.Check(ctx, pid, "Microsoft.ManagedIdentity/userAssignedIdentities/read", mi); !errors.Is(err, ErrDenied) {
		t.Fatalf("without assignments: %v", err)
	}
	if err := put(rg, "a1", Reader); err != nil {
		t.Fatal(err)
	}
	// Inherited below the scope (case-insensitively), not above or beside it.
	for scope, want := range map[string]error{
		mi: nil, "/subscriptions/s/resourcegroups/rg": nil, sub: ErrDenied, sub + "/resourceGroups/RG2": ErrDenied,
	} {
		if err := az.Check(ctx, pid, "Microsoft.ManagedIdentity/userAssignedIdentities/read", scope); !errors.Is(err, want) {
			t.Errorf("read at %s: %v, want %v", scope, err, want)
		}
	}
	if err := az.Check(ctx, pid, "Microsoft.ManagedIdentity/userAssignedIdentities/write", mi); !errors.Is(err, ErrDenied) {
		t.Errorf("Reader writes: %v", err)
	}
	if err := put(rg, "a2", Reader); !errors.Is(err, ErrExists) {
		t.Errorf("same grant, other name: %v", err)
	}
	if err := put(rg, "a1", Owner); !errors.Is(err, ErrUpdateNotPermitted) {
		t.Errorf("other grant, same name: %v", err)
	}
	if err := put(rg, "a1", Reader); err != nil {
		t.Errorf("repeated PUT: %v", err)
	}
	if err := put(mi, "a3", Owner); err != nil {
		t.Fatal(err)
	}
	if err := put(sub, "a4", KeyVaultSecretsUser); err != nil {
		t.Fatal(err)
	}
	if err := az.CheckData(ctx, pid, "Microsoft.KeyVault/vaults/secrets/getSecret/action", rg+"/providers/Microsoft.KeyVault/vaults/v"); err != nil {
		t.Errorf("data action inherited from the subscription: %v", err)
	}
	_ = st.View(ctx, func(tx *store.Tx) error {
		for _, tc := range []struct {
			scope string
			f     Filter
			want  int
		}{
			{rg, Filter{}, 3},
			{rg, Filter{AtScope: true}, 2},
			{mi, Filter{AtScope: true, PrincipalID: pid}, 3},
			{sub, Filter{PrincipalID: "other"}, 0},
		} {
			got, err := ListTx(tx, tc.scope, tc.f)
			if err != nil || len(got) != tc.want {
				t.Errorf("ListTx(%s, %+v) = %d, %v; want %d", tc.scope, tc.f, len(got), err, tc.want)
			}
		}
		return nil
	})
	// Deleting a scope takes the assignments at and below it.
	if err := st.Update(ctx, func(tx *store.Tx) error { return DeleteUnderTx(tx, rg) }); err != nil {
		t.Fatal(err)
	}
	if err := az.Check(ctx, pid, "Microsoft.ManagedIdentity/userAssignedIdentities/read", mi); !errors.Is(err, ErrDenied) {
		t.Errorf("after the group's assignments were deleted: %v", err)
	}
	if err := az.Ensure(ctx, Assignment{ID: AssignmentID(sub, "b"), Name: "b", Scope: sub, RoleDefinitionID: KeyVaultSecretsUser, PrincipalID: pid}); err != nil {
		t.Errorf("Ensure of an existing grant: %v", err)
	}
}
