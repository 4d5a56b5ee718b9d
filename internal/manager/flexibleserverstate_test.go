package manager_test

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/postgresql/armpostgresqlflexibleservers/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// As Azure Service Operator's FlexibleServer extensions: the host name is exported to a Secret
// when operatorSpec.secrets asks; while the server is stopped, no PUT is
// sent for it or its children (Azure would refuse it); the wait is reported, and the PUT goes
// once the server is Ready again.
func TestFlexibleServerStoppedHoldsPuts(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	s := az.Settings()
	suffix := strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	server := "stop-pg-" + suffix
	if err := c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-admin"},
		StringData: map[string]string{"password": "Admin-pw-one-1"}}); err != nil {
		t.Fatal(err)
	}
	rg := resourceGroup("stop-rg-"+suffix, nil)
	pg := owned(pgAPI, "FlexibleServer", "pg", rg.GetName(), map[string]any{
		"azureName": server, "location": "westus2", "version": "15", "administratorLogin": "pgadmin",
		"administratorLoginPassword": map[string]any{"name": "pg-admin", "key": "password"},
		"sku":                        map[string]any{"name": "Standard_B1ms", "tier": "Burstable"},
		"storage":                    map[string]any{"storageSizeGB": 32},
		"operatorSpec": map[string]any{"secrets": map[string]any{
			"fullyQualifiedDomainName": map[string]any{"name": "pg-host", "key": "fqdn"}}},
	})
	create(t, c, ns, rg, pg)
	got := waitReady(t, c, pg, 3*time.Minute)
	fqdn, _, _ := unstructured.NestedString(got.Object, "status", "fullyQualifiedDomainName")
	host := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "pg-host"}, host); err != nil || string(host.Data["fqdn"]) != fqdn || fqdn == "" {
		t.Errorf("ASO's secrets.fullyQualifiedDomainName export: %v, %q (status %q)", err, host.Data["fqdn"], fqdn)
	}

	servers, err := armpostgresqlflexibleservers.NewServersClient(s.SubscriptionID, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	poll := &runtime.PollUntilDoneOptions{Frequency: time.Second}
	stop, err := servers.BeginStop(t.Context(), rg.GetName(), server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stop.PollUntilDone(t.Context(), poll); err != nil {
		t.Fatal(err)
	}

	since := az.RequestLog().Last()
	db := owned(pgAPI, "FlexibleServersDatabase", "appdb", "pg", map[string]any{"charset": "UTF8"})
	create(t, c, ns, db)
	eventually(t, time.Minute, "the database reports the stopped server", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "appdb", db))
		return st == "False" && strings.Contains(msg, `state "Stopped"`), st + " " + sev + " " + reason + ": " + msg
	})
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); n != 0 {
		t.Errorf("%d PUTs while the server was stopped, want 0", n)
	}

	start, err := servers.BeginStart(t.Context(), rg.GetName(), server, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start.PollUntilDone(t.Context(), poll); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, db, 3*time.Minute)
}
