package armid

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const sub = "/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590"
	for _, tc := range []struct {
		path, typ, str, scope, rg, name string
		collection                      bool
	}{
		{path: "/subscriptions", typ: "Microsoft.Resources/subscriptions", str: "/subscriptions", scope: "/", collection: true},
		{path: sub, typ: "Microsoft.Resources/subscriptions", str: sub, scope: "/", name: "0b1f6471-1bf0-4dda-aec3-cb9272f09590"},
		{path: sub + "/resourcegroups", typ: "Microsoft.Resources/resourceGroups", str: sub + "/resourceGroups", scope: sub, collection: true},
		{path: sub + "/ResourceGroups/My-RG/", typ: "Microsoft.Resources/resourceGroups", str: sub + "/resourceGroups/My-RG", scope: sub, rg: "My-RG", name: "My-RG"},
		{
			path: sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app",
			typ:  "Microsoft.ManagedIdentity/userAssignedIdentities", scope: sub + "/resourceGroups/rg", rg: "rg", name: "app",
		},
		{
			path: sub + "/resourceGroups/rg/PROVIDERS/Microsoft.ManagedIdentity/userAssignedIdentities/app/federatedIdentityCredentials/f",
			typ:  "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials", scope: sub + "/resourceGroups/rg", rg: "rg", name: "f",
			str: sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app/federatedIdentityCredentials/f",
		},
		{
			path: sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app/providers/Microsoft.Authorization/roleAssignments/g",
			typ:  "Microsoft.Authorization/roleAssignments", scope: sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app", rg: "rg", name: "g",
		},
		{path: sub + "/providers/Microsoft.Authorization/roleAssignments", typ: "Microsoft.Authorization/roleAssignments", scope: sub, collection: true},
		{path: "/providers/Microsoft.Authorization/roleDefinitions/x", typ: "Microsoft.Authorization/roleDefinitions", scope: "/", name: "x"},
		// A resource may be named "providers".
		{
			path: sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/providers",
			typ:  "Microsoft.ManagedIdentity/userAssignedIdentities", scope: sub + "/resourceGroups/rg", rg: "rg", name: "providers",
		},
	} {
		t.Run(tc.path, func(t *testing.T) {
			id, err := Parse(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.str
			if want == "" {
				want = tc.path
			}
			if id.String() != want || id.ResourceType() != tc.typ || id.Scope().String() != tc.scope ||
				id.ResourceGroup() != tc.rg || id.Name() != tc.name || id.IsCollection() != tc.collection {
				t.Errorf("got %s type %s scope %s rg %q name %q collection %v", id, id.ResourceType(), id.Scope(), id.ResourceGroup(), id.Name(), id.IsCollection())
			}
			if id.Key() != strings.ToLower(want) {
				t.Errorf("key = %s", id.Key())
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, p := range []string{
		"", "subscriptions", "//", "/subscriptions//resourceGroups", "/things/x", "/subscriptions/s/resourceGroups/rg/things/x",
		"/subscriptions/s/providers", "/subscriptions/s/providers/Microsoft.X", "/subscriptions/s/providers/NoDot/t",
		"/subscriptions/s/providers/Microsoft.X/t/n/c", // fine: collection of c
		"/subscriptions/s/providers/Bad!/t", "/" + strings.Repeat("a/", 1100),
	} {
		id, err := Parse(p)
		if p == "/subscriptions/s/providers/Microsoft.X/t/n/c" {
			if err != nil || !id.IsCollection() {
				t.Errorf("%q: %v", p, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, %v; want ErrInvalid", p, id, err)
		}
	}
}

func TestScopeContains(t *testing.T) {
	for _, tc := range []struct {
		scope, target string
		want          bool
	}{
		{"/", "/subscriptions/s", true},
		{"/subscriptions/S", "/subscriptions/s/resourceGroups/rg", true},
		{"/subscriptions/s/resourceGroups/rg", "/subscriptions/s/resourceGroups/rg2", false},
		{"/subscriptions/s/resourceGroups/rg", "/subscriptions/s/resourcegroups/RG", true},
		{"/subscriptions/s/resourceGroups/rg", "/subscriptions/s", false},
	} {
		if got := ScopeContains(tc.scope, tc.target); got != tc.want {
			t.Errorf("ScopeContains(%s, %s) = %v", tc.scope, tc.target, got)
		}
	}
}

// FuzzParse: any input parses or fails with ErrInvalid, never panics; what parses renders to a
// string that parses to the same id.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"/subscriptions/0b1f6471-1bf0-4dda-aec3-cb9272f09590/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/a/federatedIdentityCredentials/f",
		"/subscriptions/s/resourcegroups/rg/providers/Microsoft.A/b/c/providers/Microsoft.Authorization/roleAssignments/g",
		"/providers/Microsoft.Authorization/roleDefinitions", "/subscriptions", "/", "//x", "/subscriptions/s/providers/x.y/providers/a.b/c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		id, err := Parse(path)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		again, err := Parse(id.String())
		if err != nil {
			t.Fatalf("String() %q of %q does not parse: %v", id.String(), path, err)
		}
		if again.Key() != id.Key() || again.ResourceType() != id.ResourceType() || again.IsCollection() != id.IsCollection() {
			t.Fatalf("round trip of %q: %q != %q", path, again, id)
		}
		_ = id.Scope().String()
		_ = id.Parent().String()
	})
}
