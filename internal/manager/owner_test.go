package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// An owner given by ARM id needs no Kubernetes object; one in another subscription than the
// credential's is refused with SubscriptionMismatch.
func TestARMIDOwners(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	cred, opts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	groupID := cloudtest.CreateGroup(t, az, cred, opts, "westus2", "external-rg")

	byID := obj(msiAPI, "UserAssignedIdentity", "by-arm-id", map[string]any{"location": "westus2", "owner": map[string]any{"armId": groupID}})
	elsewhere := obj(msiAPI, "UserAssignedIdentity", "other-subscription", map[string]any{"location": "westus2",
		"owner": map[string]any{"armId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/external-rg"}})
	create(t, c, ns, byID, elsewhere)
	waitReady(t, c, byID, time.Minute)
	ids, err := armmsi.NewUserAssignedIdentitiesClient(az.Settings().SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ids.Get(t.Context(), "external-rg", "by-arm-id", nil); err != nil {
		t.Errorf("identity owned by ARM id not in ARM: %v", err)
	}
	eventually(t, time.Minute, "subscription mismatch", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "other-subscription", elsewhere))
		return st == "False" && sev == "Error" && reason == "SubscriptionMismatch" && strings.Contains(msg, "00000000-0000-0000-0000-000000000000"),
			st + " " + sev + " " + reason + ": " + msg
	})
}
