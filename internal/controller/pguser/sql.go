package pguser

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	pgv1 "github.com/cerulean/cerulean/api/dbforpostgresql/v1"
)

// The plan is pure: the statements that bring a role to its spec, given what the server has.

// roleOptions is the WITH clause of a role's attributes.
func roleOptions(o *pgv1.RoleOptionsSpec) string {
	if o == nil {
		o = &pgv1.RoleOptionsSpec{Login: true}
	}
	opt := func(on bool, yes, no string) string {
		if on {
			return yes
		}
		return no
	}
	return strings.Join([]string{
		opt(o.Login, "LOGIN", "NOLOGIN"), opt(o.CreateRole, "CREATEROLE", "NOCREATEROLE"),
		opt(o.CreateDb, "CREATEDB", "NOCREATEDB"), opt(o.Replication, "REPLICATION", "NOREPLICATION"),
	}, " ")
}

// quoteLiteral quotes a string constant (standard_conforming_strings is on in every supported
// PostgreSQL: only quotes are doubled). CREATE ROLE takes no bind parameters.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// roleStatement creates the role or sets its attributes and password.
func roleStatement(name string, exists bool, o *pgv1.RoleOptionsSpec, password string) string {
	verb := "CREATE ROLE "
	if exists {
		verb = "ALTER ROLE "
	}
	return verb + ident(name) + " WITH " + roleOptions(o) + " PASSWORD " + quoteLiteral(password)
}

// membershipStatements grant the listed roles the user lacks and revoke the ones no longer listed.
func membershipStatements(name string, want, have []string) []string {
	wantSet, haveSet := set(want), set(have)
	var out []string
	for _, r := range sorted(wantSet) {
		if !haveSet[r] {
			out = append(out, "GRANT "+ident(r)+" TO "+ident(name))
		}
	}
	for _, r := range sorted(haveSet) {
		if !wantSet[r] {
			out = append(out, "REVOKE "+ident(r)+" FROM "+ident(name))
		}
	}
	return out
}

// appliedHash identifies what was applied (attributes, password, roles), so that a steady
// state writes nothing: the password's hash, never the password, is kept on the object.
func appliedHash(u *pgv1.User, password string) string {
	h := sha256.New()
	h.Write([]byte(roleOptions(u.Spec.RoleOptions)))
	h.Write([]byte{0})
	h.Write([]byte(password))
	h.Write([]byte{0})
	h.Write([]byte(strings.Join(sorted(set(u.Spec.Roles)), ",")))
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
