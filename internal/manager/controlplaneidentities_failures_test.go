package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// TestControlPlaneIdentitiesFailures: a missing identity or vault reference, and a Key Vault
// that refuses the write (403), each show as the component's Ready=False with a reason and a
// message that says what to fix, and an Event; nothing is half-written.
func TestControlPlaneIdentitiesFailures(t *testing.T) {
	c := kube(t)
	installSPCCRD(t, c)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	ns := namespace(t, c)
	startCPIManager(t, az, time.Now, ns)
	ctx := t.Context()
	owner := cloudtest.OwnerCred(t, az)
	cloudtest.CreateGroup(t, az, owner, cloudtest.ARMOptions(az), "westus2", "rg-fail")
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	cpo, err := ids.CreateOrUpdate(ctx, "rg-fail", "cpo", armmsi.Identity{Location: to.Ptr("westus2")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A vault where the manager may read secrets but not write them.
	vault := obj("keyvault.azure.com/v1api20230701", "Vault", "kv-readonly", map[string]any{
		"location": "westus2", "owner": map[string]any{"armId": "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-fail"},
		"properties": map[string]any{"tenantId": s.TenantID, "sku": map[string]any{"family": "A", "name": "standard"}, "enableRbacAuthorization": true},
	})
	grant := obj("authorization.azure.com/v1api20220401", "RoleAssignment", "manager-secrets-user", map[string]any{
		"owner":       map[string]any{"name": "kv-readonly", "group": "keyvault.azure.com", "kind": "Vault"},
		"principalId": s.ObjectID, "principalType": "ServicePrincipal",
		"roleDefinitionReference": map[string]any{"wellKnownName": "Key Vault Secrets User"},
	})
	create(t, c, ns, vault, grant)
	waitReady(t, c, grant, time.Minute)
	reader := "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f"

	// A principal that may read the group and write the vault's secrets but not assign the
	// identity, used by one object through ASO's credential-from annotation.
	dir := az.Entra().Directory
	limited, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: "limited"})
	if err != nil {
		t.Fatal(err)
	}
	limitedSecret, _, err := dir.AddSecret(ctx, s.TenantID, limited.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	vaultID, _, _ := unstructured.NestedString(waitReady(t, c, vault, time.Minute).Object, "status", "id")
	now := time.Now().UTC()
	for i, g := range []struct{ scope, role string }{
		{"/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg-fail", authz.Reader},
		{vaultID, authz.KeyVaultSecretsOfficer},
	} {
		name := []string{"5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a", "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1b"}[i]
		if err := az.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(g.scope, name), Name: name, Scope: g.scope,
			RoleDefinitionID: g.role, PrincipalID: limited.ObjectID, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limited-cred"}, StringData: map[string]string{
		"AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_TENANT_ID": s.TenantID, "AZURE_CLIENT_ID": limited.ClientID, "AZURE_CLIENT_SECRET": limitedSecret,
	}}); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		spec   cpv1.ControlPlaneIdentitiesSpec
		reason string
		parts  []string
		cred   string
	}{
		{"forbidden-identity", cpv1.ControlPlaneIdentitiesSpec{KeyVault: cpv1.ResourceReference{Name: "kv-readonly"}, VaultReader: cpv1.ReaderReference{ClientID: reader},
			Components: []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{ARMID: *cpo.ID}}}},
			cpv1.ReasonCredentialsForbidden, []string{"the managed-identity data plane refused the credentials of " + *cpo.ID, "403 Forbidden", "Managed Identity Operator"}, "limited-cred"},
		{"missing-identity", cpv1.ControlPlaneIdentitiesSpec{KeyVault: cpv1.ResourceReference{Name: "kv-readonly"}, VaultReader: cpv1.ReaderReference{ClientID: reader},
			Components: []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{Name: "no-such-identity"}}}},
			cpv1.ReasonReferenceNotFound, []string{"identity: UserAssignedIdentity " + ns + "/no-such-identity does not exist"}, ""},
		{"missing-vault", cpv1.ControlPlaneIdentitiesSpec{KeyVault: cpv1.ResourceReference{Name: "no-such-vault"}, VaultReader: cpv1.ReaderReference{ClientID: reader},
			Components: []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{ARMID: *cpo.ID}}}},
			cpv1.ReasonReferenceNotFound, []string{"keyVault: Vault " + ns + "/no-such-vault does not exist"}, ""},
		{"forbidden-write", cpv1.ControlPlaneIdentitiesSpec{KeyVault: cpv1.ResourceReference{Name: "kv-readonly"}, VaultReader: cpv1.ReaderReference{ClientID: reader},
			Components: []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{ARMID: *cpo.ID}}}},
			cpv1.ReasonKeyVaultForbidden, []string{"Key Vault refused to write secret managed-azure-cpo in vault kv-readonly", "403 Forbidden", "Key Vault Secrets Officer"}, ""},
	}
	for _, tc := range cases {
		o := &cpv1.ControlPlaneIdentities{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: tc.spec}
		if tc.cred != "" {
			o.Annotations = map[string]string{"serviceoperator.azure.com/credential-from": tc.cred}
		}
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", tc.name, err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			waitComponent(t, c, ns, tc.name, cpv1.ComponentCPO, tc.reason, func(_ cpv1.ComponentStatus, rc *metav1.Condition) bool {
				if rc.Status != metav1.ConditionFalse || rc.Reason != tc.reason {
					return false
				}
				for _, p := range tc.parts {
					if !strings.Contains(rc.Message, p) {
						return false
					}
				}
				return true
			})
			o := getCPI(t, c, ns, tc.name)
			if rc := meta.FindStatusCondition(o.Status.Conditions, cpv1.ConditionReady); rc == nil || rc.Status != metav1.ConditionFalse || rc.Reason != tc.reason {
				t.Errorf("object Ready %+v", rc)
			}
			if !hasEvent(t, c, ns, tc.name, tc.reason, tc.parts[0]) {
				t.Errorf("no %s event", tc.reason)
			}
			if tc.name == "forbidden-write" {
				// Retries (every 300 ms here) store the credentials issued first rather than
				// mint a certificate per attempt.
				before := len(principalOf(t, az, *cpo.Properties.ClientID).Certificates)
				time.Sleep(2 * time.Second)
				if n := len(principalOf(t, az, *cpo.Properties.ClientID).Certificates); n != 1 || before != 1 {
					t.Errorf("%d then %d certificates registered on the identity by retries, want 1", before, n)
				}
			}
			// Nothing half-done: no SecretProviderClass without its credentials.
			spc := &secretsstorev1.SecretProviderClass{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: string(cpv1.ComponentCPO)}, spc); err == nil && metav1.IsControlledBy(spc, o) {
				t.Errorf("a SecretProviderClass was created for a component without credentials")
			}
		})
	}
}

// TestControlPlaneIdentitiesValidation: the CRD's schema refuses bad specs before any
// controller sees them.
func TestControlPlaneIdentitiesValidation(t *testing.T) {
	c := kube(t)
	ns := namespace(t, c)
	id := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/cpo"
	good := func() cpv1.ControlPlaneIdentitiesSpec {
		return cpv1.ControlPlaneIdentitiesSpec{KeyVault: cpv1.ResourceReference{Name: "kv"}, VaultReader: cpv1.ReaderReference{Name: "nodes"},
			Components: []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{ARMID: id}}}}
	}
	for name, tc := range map[string]struct {
		mutate func(*cpv1.ControlPlaneIdentitiesSpec)
		want   string
	}{
		"both name and armId": {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components[0].Identity.Name = "cpo" }, "set exactly one of name and armId"},
		"neither":             {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.KeyVault = cpv1.ResourceReference{} }, "set exactly one of name and armId"},
		"unknown component":   {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components[0].Name = "managed-azure-everything" }, "Unsupported value"},
		"no components":       {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components = nil }, "components"},
		"duplicate component": {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components = append(s.Components, s.Components[0]) }, "Duplicate value"},
		"bad armId":           {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components[0].Identity.ARMID = "cpo" }, "armId"},
		"two reader fields": {func(s *cpv1.ControlPlaneIdentitiesSpec) {
			s.VaultReader.ClientID = "0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f"
		}, "set exactly one of name, armId and clientId"},
		"reader not a uuid": {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.VaultReader = cpv1.ReaderReference{ClientID: "nodes"} }, "clientId"},
		"bad secret name":   {func(s *cpv1.ControlPlaneIdentitiesSpec) { s.Components[0].SecretName = "not_valid!" }, "secretName"},
	} {
		t.Run(name, func(t *testing.T) {
			spec := good()
			tc.mutate(&spec)
			o := &cpv1.ControlPlaneIdentities{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: spec}
			err := c.Create(t.Context(), o)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: %v, want Invalid mentioning %q", err, tc.want)
			}
		})
	}
	o := &cpv1.ControlPlaneIdentities{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"}, Spec: good()}
	if err := c.Create(t.Context(), o); err != nil {
		t.Fatalf("a valid spec was refused: %v", err)
	}
	if err := c.Delete(t.Context(), o); err != nil {
		t.Fatal(err)
	}
}
