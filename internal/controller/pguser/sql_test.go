package pguser

import (
	"reflect"
	"strings"
	"testing"

	pgv1 "github.com/cerulean/cerulean/api/dbforpostgresql/v1"
)

func TestRoleStatement(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
		opts   *pgv1.RoleOptionsSpec
		pw     string
		want   string
	}{
		{"app", false, nil, "p", `CREATE ROLE "app" WITH LOGIN NOCREATEROLE NOCREATEDB NOREPLICATION PASSWORD 'p'`},
		{"app", true, &pgv1.RoleOptionsSpec{CreateRole: true, CreateDb: true}, "p", `ALTER ROLE "app" WITH NOLOGIN CREATEROLE CREATEDB NOREPLICATION PASSWORD 'p'`},
		{`we"ird`, false, &pgv1.RoleOptionsSpec{Login: true, Replication: true}, `it's\`, `CREATE ROLE "we""ird" WITH LOGIN NOCREATEROLE NOCREATEDB REPLICATION PASSWORD 'it''s\'`},
	} {
		if got := roleStatement(tc.name, tc.exists, tc.opts, tc.pw); got != tc.want {
			t.Errorf("roleStatement(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestMembershipStatements(t *testing.T) {
	got := membershipStatements("app", []string{"azure_pg_admin", "readers"}, []string{"readers", "writers"})
	want := []string{`GRANT "azure_pg_admin" TO "app"`, `REVOKE "writers" FROM "app"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("membershipStatements = %q, want %q", got, want)
	}
	if got := membershipStatements("app", []string{"a"}, []string{"a"}); len(got) != 0 {
		t.Errorf("in sync: %q, want nothing", got)
	}
}

func TestAppliedHashHoldsNoPassword(t *testing.T) {
	u := &pgv1.User{Spec: pgv1.UserSpec{Roles: []string{"b", "a"}}}
	h1 := appliedHash(u, "hunter2-secret")
	if strings.Contains(h1, "hunter2") {
		t.Fatal("hash holds the password")
	}
	if h1 == appliedHash(u, "other") {
		t.Error("a new password must change the hash (it is applied)")
	}
	u2 := &pgv1.User{Spec: pgv1.UserSpec{Roles: []string{"a", "b"}}}
	if h1 != appliedHash(u2, "hunter2-secret") {
		t.Error("role order must not change the hash")
	}
}
