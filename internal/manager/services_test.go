package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
)

const (
	storageAPI = "storage.azure.com/v1api20230101"
	pgAPI      = "dbforpostgresql.azure.com/v1api20240801"
)

func owned(apiVersion, kind, name, owner string, spec map[string]any) *unstructured.Unstructured {
	if spec == nil {
		spec = map[string]any{}
	}
	spec["owner"] = map[string]any{"name": owner}
	return obj(apiVersion, kind, name, spec)
}

// The storage children as Azure Service Operator orders them: created before their owners,
// they wait (WaitingForOwner) and then go Ready; in steady state nothing is written; a
// detach-on-delete child is kept out of the deletion; deleting the account's object deletes
// every child object with it (their ownerReferences) and the account in Azure.
func TestStorageChildrenOrderSteadyStateAndDeletion(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	const sync = 2 * time.Second
	startManager(t, az, sync, ns)
	log := az.RequestLog()

	account := "kindsa" + strings.ReplaceAll(ns[len(ns)-5:], "-", "")
	children := []*unstructured.Unstructured{
		owned(storageAPI, "StorageAccountsBlobServicesContainer", "uploads", "blobs", map[string]any{"publicAccess": "None"}),
		owned(storageAPI, "StorageAccountsBlobService", "blobs", "sa", nil),
		owned(storageAPI, "StorageAccountsQueueServicesQueue", "jobs", "queues", map[string]any{"metadata": map[string]any{"team": "a"}}),
		owned(storageAPI, "StorageAccountsQueueService", "queues", "sa", nil),
		owned(storageAPI, "StorageAccountsTableServicesTable", "events", "tables", map[string]any{"azureName": "Events"}),
		owned(storageAPI, "StorageAccountsTableService", "tables", "sa", nil),
	}
	children[2].SetAnnotations(map[string]string{"serviceoperator.azure.com/reconcile-policy": "detach-on-delete"})
	create(t, c, ns, children...)
	eventually(t, time.Minute, "a container waits for its service", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "uploads", children[0]))
		return st == "False" && sev == "Info" && reason == "WaitingForOwner", st + " " + reason + ": " + msg
	})
	rg := resourceGroup("kinds-rg-"+ns[len(ns)-5:], nil)
	sa := owned(storageAPI, "StorageAccount", "sa", rg.GetName(), map[string]any{
		"azureName": account, "location": "westus2", "kind": "StorageV2", "sku": map[string]any{"name": "Standard_LRS"}})
	create(t, c, ns, rg, sa)
	for _, u := range append([]*unstructured.Unstructured{rg, sa}, children...) {
		waitReady(t, c, u, 2*time.Minute)
	}
	container := get(t, c, ns, "uploads", children[0])
	id, _, _ := unstructured.NestedString(container.Object, "status", "id")
	if !strings.HasSuffix(strings.ToLower(id), "/storageaccounts/"+account+"/blobservices/default/containers/uploads") {
		t.Errorf("container status.id = %q", id)
	}
	if refs := container.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "StorageAccountsBlobService" || refs[0].Name != "blobs" {
		t.Errorf("container ownerReferences = %v, want its blob service", refs)
	}

	since := log.Last()
	time.Sleep(3 * sync)
	if puts := log.Count(reqlog.Filter{Service: "arm", Method: "PUT", Since: since}); puts != 0 {
		t.Errorf("steady state sent %d PUTs over three sync periods, want 0", puts)
	}
	if gets := log.Count(reqlog.Filter{Service: "arm", Method: "GET", Since: since}); gets < len(children) {
		t.Errorf("steady state sent %d GETs, want at least one per child (%d)", gets, len(children))
	}

	deleteSince := log.Last()
	if err := c.Delete(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	for _, u := range append([]*unstructured.Unstructured{sa}, children...) {
		waitGone(t, c, u, 2*time.Minute)
	}
	accountDeleted := false
	for _, e := range log.Entries(reqlog.Filter{Service: "arm", Method: "DELETE", Since: deleteSince}) {
		path := strings.ToLower(e.Path)
		if strings.Contains(path, "/queues/jobs") {
			t.Errorf("the detach-on-delete queue was deleted in Azure: %s", e.Path)
		}
		if strings.HasSuffix(path, "/storageaccounts/"+account) {
			accountDeleted = true
		}
	}
	if !accountDeleted {
		t.Error("the account was not deleted in Azure")
	}
}

// A secret input (FlexibleServer administratorLoginPassword) is read from the object's own
// namespace only: missing, the object waits with Ready=False SecretNotFound; a Secret of the
// same name in another namespace does not count; once the Secret exists the object moves on
// without any change of its own (the Secret is watched). The value appears in no status,
// Event or log line.
func TestSecretInputWaitsAndNeverLeaks(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns, other := namespace(t, c), namespace(t, c)
	logs := startManagerLogged(t, az, time.Minute, ns)
	const password = "Kinds-secret-value-7f3a9c"

	rg := resourceGroup("kinds-pg-rg-"+ns[len(ns)-5:], nil)
	server := owned(pgAPI, "FlexibleServer", "pg", rg.GetName(), map[string]any{
		"azureName": "kinds-pg-" + ns[len(ns)-5:], // "pg" is shorter than Azure's 3 characters
		"location":  "westus2", "version": "16", "administratorLogin": "pgadmin",
		"administratorLoginPassword": map[string]any{"name": "pg-admin", "key": "password"},
		"sku":                        map[string]any{"name": "Standard_B1ms", "tier": "Burstable"},
		"storage":                    map[string]any{"storageSizeGB": 32},
	})
	elsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "pg-admin"}, StringData: map[string]string{"password": password}}
	if err := c.Create(t.Context(), elsewhere); err != nil {
		t.Fatal(err)
	}
	create(t, c, ns, rg, server)
	waitReady(t, c, rg, time.Minute)
	waitSecretNotFound := func(what, contains string) {
		eventually(t, time.Minute, what, func() (bool, string) {
			st, sev, reason, msg := ready(get(t, c, ns, "pg", server))
			return st == "False" && sev == "Warning" && reason == "SecretNotFound" && strings.Contains(msg, contains), st + " " + sev + " " + reason + ": " + msg
		})
	}
	waitSecretNotFound("missing Secret", "Secret "+ns+"/pg-admin does not exist")

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-admin"}, StringData: map[string]string{"other": "x"}}
	if err := c.Create(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	waitSecretNotFound("missing key", "has no key password")

	s.StringData = map[string]string{"password": password}
	if err := c.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the Secret's change is picked up", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "pg", server))
		return reason != "SecretNotFound" && reason != "", st + " " + sev + " " + reason + ": " + msg
	})

	got := get(t, c, ns, "pg", server)
	b, _ := json.Marshal(got.Object)
	if strings.Contains(string(b), password) {
		t.Errorf("the object holds the secret value: %s", b)
	}
	events := &eventsv1.EventList{}
	if err := c.List(t.Context(), events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Note, password) {
			t.Errorf("an Event holds the secret value: %s", e.Note)
		}
	}
	if strings.Contains(logs.String(), password) {
		t.Error("the manager logged the secret value")
	}
}

// startManagerLogged runs the manager with debug logs kept for the test to search.
func startManagerLogged(t *testing.T, az *cloud.Cloud, sync time.Duration, namespaces ...string) *cloudtest.SyncBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	go func() {
		done <- manager.Run(ctx, manager.Options{
			REST: devenvtest.ControlPlane(t).RESTConfig, Azure: azureConfig(az),
			SyncPeriod: sync, PollInterval: 100 * time.Millisecond, TargetNamespaces: namespaces,
			MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true,
			Logger:         logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler()),
			PostgreSQLDial: dataPlaneDial(az),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", tail(logs.String(), 60))
		}
	})
	t.Cleanup(func() { deleteAll(t, namespaces) })
	return logs
}

// dataPlaneDial connects to a data plane's Azure name where the in-process cloud serves it
// (the cloud's DNS answers those names for pods; this process asks the cloud directly).
func dataPlaneDial(az *cloud.Cloud) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ap, ok := az.DataPlaneEndpoint(host)
		if !ok {
			return nil, fmt.Errorf("no data plane answers %s", host)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, ap.String())
	}
}
