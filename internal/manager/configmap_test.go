package manager_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// A value read through xFromConfig follows its ConfigMap: a change reaches ARM at once (the
// ConfigMap is watched), not at the next sync period (an hour here).
func TestFromConfigFollowsTheConfigMap(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Hour, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workload"}, Data: map[string]string{"subject": "system:serviceaccount:a:one"}}
	if err := c.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	rg := resourceGroup("cm-rg", nil)
	id := obj(msiAPI, "UserAssignedIdentity", "cm-identity", map[string]any{"location": "westus2", "owner": map[string]any{"name": "cm-rg"}})
	fic := obj(msiAPI, "FederatedIdentityCredential", "cm-fic", map[string]any{
		"owner": map[string]any{"name": "cm-identity"}, "audiences": []any{"api://AzureADTokenExchange"},
		"issuer": devenvIssuer(t), "subjectFromConfig": map[string]any{"name": "workload", "key": "subject"},
	})
	create(t, c, ns, rg, id, fic)
	waitReady(t, c, fic, time.Minute)

	creds, err := armmsi.NewFederatedIdentityCredentialsClient(az.Settings().SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	subject := func() string {
		f, err := creds.Get(t.Context(), "cm-rg", "cm-identity", "cm-fic", nil)
		if err != nil {
			t.Fatal(err)
		}
		return *f.Properties.Subject
	}
	if got := subject(); got != "system:serviceaccount:a:one" {
		t.Fatalf("subject in ARM %q", got)
	}
	cm.Data["subject"] = "system:serviceaccount:a:two"
	if err := c.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "new subject in ARM", func() (bool, string) {
		got := subject()
		return got == "system:serviceaccount:a:two", got
	})
}
