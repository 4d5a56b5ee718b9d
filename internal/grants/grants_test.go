package grants_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/grants"
)

const sub = "/subscriptions/00000000-0000-0000-0000-000000000001"

func grant(name string, namespaces, identities, scopes []string) ceruleanv1.NamespaceGrant {
	return ceruleanv1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: ceruleanv1.NamespaceGrantSpec{Namespaces: namespaces, Identities: identities, Scopes: scopes}}
}

var all = []ceruleanv1.NamespaceGrant{
	grant("team-a", []string{"team-a", "team-a-dev"}, []string{sub + "/resourceGroups/rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app", "11111111-2222-3333-4444-555555555555"},
		[]string{sub + "/resourceGroups/rg-a", sub + "/resourceGroups/team-a-*"}),
	grant("shared-ids", []string{"team-b"}, []string{sub + "/resourceGroups/shared-ids"}, nil),
	grant("whole-sub", []string{"platform"}, nil, []string{sub}),
	grant("everything", []string{"admin"}, []string{"*"}, []string{"/subscriptions/*"}),
}

func TestCheckIdentity(t *testing.T) {
	for _, c := range []struct {
		ns   string
		id   grants.Identity
		want bool
	}{
		{"team-a", grants.Identity{ResourceID: sub + "/resourceGroups/rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"}, true},
		{"team-a-dev", grants.Identity{ResourceID: strings.ToUpper(sub) + "/resourcegroups/RG-A/providers/microsoft.managedidentity/userassignedidentities/APP"}, true},
		{"team-a", grants.Identity{ClientID: "11111111-2222-3333-4444-555555555555"}, true},
		{"team-a", grants.Identity{ClientID: "99999999-2222-3333-4444-555555555555"}, false},
		{"team-a", grants.Identity{ResourceID: sub + "/resourceGroups/rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/other"}, false},
		{"team-b", grants.Identity{ResourceID: sub + "/resourceGroups/shared-ids/providers/Microsoft.ManagedIdentity/userAssignedIdentities/any"}, true},
		{"team-b", grants.Identity{ResourceID: sub + "/resourceGroups/shared-ids-2/providers/Microsoft.ManagedIdentity/userAssignedIdentities/any"}, false},
		{"team-b", grants.Identity{ResourceID: sub + "/resourceGroups/shared-ids/../rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app"}, false},
		{"team-c", grants.Identity{ClientID: "11111111-2222-3333-4444-555555555555"}, false},
		{"platform", grants.Identity{ClientID: "11111111-2222-3333-4444-555555555555"}, false}, // scopes are not identities
		{"team-c", grants.Identity{}, true},
		{"admin", grants.Identity{ResourceID: sub + "/resourceGroups/x/providers/Microsoft.ManagedIdentity/userAssignedIdentities/y", ClientID: "99999999-2222-3333-4444-555555555555"}, true},
		// A granted resource id does not carry an ungranted client id along.
		{"team-a", grants.Identity{ResourceID: sub + "/resourceGroups/rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app", ClientID: "99999999-2222-3333-4444-555555555555"}, false},
		{"team-a", grants.Identity{ResourceID: sub + "/resourceGroups/rg-a/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app", ClientID: "11111111-2222-3333-4444-555555555555"}, true},
	} {
		err := grants.CheckIdentity(all, c.ns, c.id)
		if (err == nil) != c.want {
			t.Errorf("%s %+v: %v, want granted=%v", c.ns, c.id, err, c.want)
		}
		if err != nil && (!errors.Is(err, grants.ErrNotGranted) || !strings.Contains(err.Error(), "spec.identities of a NamespaceGrant") || !strings.Contains(err.Error(), "lists "+c.ns)) {
			t.Errorf("refusal does not name the grant to add: %v", err)
		}
	}
}

func TestCheckScopes(t *testing.T) {
	for _, c := range []struct {
		ns      string
		ids     []string
		missing []string
	}{
		{"team-a", []string{sub + "/resourceGroups/rg-a"}, nil},
		{"team-a", []string{sub + "/resourceGroups/RG-A/providers/Microsoft.KeyVault/vaults/v"}, nil},
		{"team-a", []string{sub + "/resourceGroups/team-a-web", sub + "/resourceGroups/team-a-/x"}, nil},
		{"team-a", []string{sub + "/resourceGroups/rg-ab"}, []string{sub + "/resourceGroups/rg-ab"}},
		{"team-a", []string{sub}, []string{sub}},
		{"team-a", []string{sub + "/resourceGroups/team-b-web"}, []string{sub + "/resourceGroups/team-b-web"}},
		{"team-a", []string{sub + "/resourceGroups/rg-a/../rg-b"}, []string{sub + "/resourceGroups/rg-a/../rg-b"}},
		{"team-a", []string{sub + "/resourceGroups/rg-a//x"}, []string{sub + "/resourceGroups/rg-a//x"}},
		{"platform", []string{sub + "/resourceGroups/anything/providers/X/y/z"}, nil},
		{"platform", []string{"/subscriptions/00000000-0000-0000-0000-000000000002"}, []string{"/subscriptions/00000000-0000-0000-0000-000000000002"}},
		{"team-b", []string{sub + "/resourceGroups/shared-ids"}, []string{sub + "/resourceGroups/shared-ids"}}, // identities are not scopes
		{"nobody", nil, nil},
		{"admin", []string{sub + "/resourceGroups/x", "/subscriptions/other/resourceGroups/y"}, nil},
	} {
		err := grants.CheckScopes(all, c.ns, c.ids)
		var r *grants.Refusal
		if c.missing == nil {
			if err != nil {
				t.Errorf("%s %v: %v", c.ns, c.ids, err)
			}
			continue
		}
		if !errors.As(err, &r) || !slices.Equal(r.Values, c.missing) || r.Field != "scopes" {
			t.Errorf("%s %v: %v, want missing %v", c.ns, c.ids, err, c.missing)
		}
	}
}

func TestReferences(t *testing.T) {
	spec := map[string]any{
		"owner":                   map[string]any{"armId": sub + "/resourceGroups/rg"},
		"roleDefinitionReference": map[string]any{"armId": "/providers/Microsoft.Authorization/roleDefinitions/x"},
		"properties": map[string]any{"subnets": []any{map[string]any{"armId": sub + "/resourceGroups/net/x"}, map[string]any{"name": "n"}},
			"identity": map[string]any{"armId": ""}},
		"principalIdFromConfig": map[string]any{"name": "cm", "key": "k"},
	}
	got := grants.References(spec)
	want := []string{sub + "/resourceGroups/net/x", sub + "/resourceGroups/rg"}
	if !slices.Equal(got, want) {
		t.Fatalf("References = %v, want %v", got, want)
	}
}

func TestCheckAzureIdentity(t *testing.T) {
	sp := func(secretNS string) *aadv1.AzureIdentity {
		return &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "sp", Namespace: "team-a"}, Spec: aadv1.AzureIdentitySpec{
			Type: aadv1.ServicePrincipal, ClientID: "11111111-2222-3333-4444-555555555555", ResourceID: "/ignored",
			ClientPassword: corev1.SecretReference{Name: "s", Namespace: secretNS}}}
	}
	if err := grants.CheckAzureIdentity(all, "team-a", sp("team-a")); err != nil {
		t.Errorf("service principal with its own secret: %v", err)
	}
	if err := grants.CheckAzureIdentity(all, "team-a", sp("")); err != nil {
		t.Errorf("service principal, secret namespace defaulted: %v", err)
	}
	if err := grants.CheckSecret(sp("team-a")); err != nil {
		t.Errorf("service principal with its own secret: %v", err)
	}
	if err := grants.CheckSecret(sp("kube-system")); !errors.Is(err, grants.ErrNotGranted) {
		t.Errorf("service principal with another namespace's secret: %v", err)
	}
	if err := grants.CheckAzureIdentity(all, "team-b", sp("team-a")); !errors.Is(err, grants.ErrNotGranted) {
		t.Errorf("service principal used from an ungranted namespace: %v", err)
	}
}
