package keyvault

import (
	"slices"
	"testing"

	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
)

func TestApplyPolicies(t *testing.T) {
	const tid = "00000000-0000-0000-0000-000000000001"
	pol := func(oid string, secrets ...string) kv.AccessPolicy {
		return kv.AccessPolicy{TenantID: tid, ObjectID: oid, Permissions: kv.Permissions{Secrets: secrets}}
	}
	cur := []kv.AccessPolicy{pol("a", "get"), pol("b", "get", "list")}
	for _, tc := range []struct {
		kind    string
		change  kv.AccessPolicy
		wantA   []string // a's secrets after; nil = no entry for a
		wantLen int
	}{
		{"add", pol("a", "set", "get"), []string{"get", "set"}, 2},
		{"add", pol("c", "get"), []string{"get"}, 3},
		{"replace", pol("a", "list"), []string{"list"}, 2},
		{"remove", pol("a", "get"), nil, 1},
		{"remove", kv.AccessPolicy{TenantID: tid, ObjectID: "a"}, nil, 1},
		{"remove", pol("c", "get"), []string{"get"}, 2},
		{"add", kv.AccessPolicy{TenantID: tid, ObjectID: "A", Permissions: kv.Permissions{Secrets: []string{"list"}}}, []string{"get", "list"}, 2},
	} {
		got := applyPolicies(cur, []kv.AccessPolicy{tc.change}, tc.kind)
		i := slices.IndexFunc(got, func(p kv.AccessPolicy) bool { return p.ObjectID == "a" })
		var a []string
		if i >= 0 {
			a = got[i].Permissions.Secrets
		}
		if len(got) != tc.wantLen || !slices.Equal(a, tc.wantA) {
			t.Errorf("%s %+v: got %+v", tc.kind, tc.change, got)
		}
	}
	if cur[0].Permissions.Secrets[0] != "get" || len(cur) != 2 {
		t.Error("applyPolicies changed its input")
	}
}

func TestVaultNames(t *testing.T) {
	for name, ok := range map[string]bool{
		"abc": true, "kv-01": true, "a23456789012345678901234": true, "a234567890123456789012345": false,
		"ab": false, "1ab": false, "ab-": false, "a--b": false, "a_b": false, "-ab": false, "aé": false,
	} {
		if validName(name) != ok {
			t.Errorf("validName(%q) = %v", name, !ok)
		}
	}
}
