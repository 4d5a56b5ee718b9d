package manager_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// A 403 from ARM is severity Error, yet retried each sync period: a role granted later heals it
// without touching the object.
func TestForbiddenHealsWhenARoleIsGranted(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	s := az.Settings()
	dir := az.Entra().Directory
	p, err := dir.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: "manager-without-roles"})
	if err != nil {
		t.Fatal(err)
	}
	secret, _, err := dir.AddSecret(t.Context(), s.TenantID, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cfg := azureConfig(az)
	cfg.ClientID, cfg.ClientSecret = p.ClientID, secret
	startManagerAs(t, cfg, 2*time.Second, ns)

	rg := resourceGroup("forbidden-rg", nil)
	create(t, c, ns, rg)
	eventually(t, time.Minute, "403 reported", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "forbidden-rg", rg))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently", st + " " + sev + " " + reason + ": " + msg
	})
	if groupExists(t, az, "forbidden-rg") {
		t.Fatal("the group exists although the manager had no role")
	}

	assignments, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	scope := "/subscriptions/" + s.SubscriptionID
	contributor := scope + "/providers/Microsoft.Authorization/roleDefinitions/b24988ac-6180-42a0-ab88-20f7382dd24c"
	if _, err := assignments.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{PrincipalID: &p.ObjectID, RoleDefinitionID: &contributor},
	}, nil); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, rg, time.Minute)
	if !groupExists(t, az, "forbidden-rg") {
		t.Error("Ready, but the group is not in the cloud")
	}
}
