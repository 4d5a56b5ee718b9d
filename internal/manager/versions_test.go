package manager_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// Azure Service Operator's published samples for the API versions its latest release serves
// besides the ones other tests use (testdata/aso-samples, each file naming its source) apply unchanged and go Ready. The
// samples of one version share Azure names with the others' (aso-sample-rg, sampleredis1), so
// each set runs in a namespace of its own, one after the other, and is deleted before the next.
func TestASOVersionSamples(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	type sampleSet struct {
		name  string
		files []string
	}
	sets := []sampleSet{
		{"identity-vault-role", []string{"managedidentity/v1api20181130_userassignedidentity.yaml",
			"managedidentity/v1api20220131preview_federatedidentitycredential.yaml",
			"keyvault/v1api20210401preview_vault.yaml", "authorization/v1api20200801preview_roleassignment.yaml"}},
		{"role-v20200801preview", []string{"managedidentity/v1api20181130_userassignedidentity.yaml",
			"authorization/v20200801preview_roleassignment.yaml"}},
		{"postgresql-v1api20210601", []string{"dbforpostgresql/v1api20210601_flexibleserver.yaml",
			"dbforpostgresql/v1api20210601_flexibleserversdatabase.yaml", "dbforpostgresql/v1api20210601_flexibleserversfirewallrule.yaml"}},
		// (ASO's configuration sample sets pgaudit.log: the local cloud's PostgreSQL has no pgaudit.)
		{"postgresql-v1api20250801", []string{"dbforpostgresql/v1api20250801_flexibleserver.yaml",
			"dbforpostgresql/v1api20250801_flexibleserversdatabase.yaml", "dbforpostgresql/v1api20250801_flexibleserversfirewallrule.yaml"}},
	}
	for _, v := range []string{"v20220901", "v20250601"} {
		sets = append(sets, sampleSet{"storage-" + v, []string{"storage/" + v + "_storageaccount.yaml", "storage/" + v + "_storageaccountsblobservice.yaml",
			"storage/" + v + "_storageaccountsblobservicescontainer.yaml", "storage/" + v + "_storageaccountsqueueservice.yaml",
			"storage/" + v + "_storageaccountsqueueservicesqueue.yaml"}})
	}
	for _, v := range []string{"v1api20201201", "v1api20230401", "v20201201", "v20230401", "v20230801", "v20241101"} {
		sets = append(sets, sampleSet{"redis-" + v, []string{"cache/" + v + "_redis.yaml", "cache/" + v + "_redisfirewallrule.yaml"}})
	}
	namespaces := make([]string, len(sets))
	for i := range sets {
		namespaces[i] = namespace(t, c)
	}
	startManager(t, az, time.Hour, namespaces...)

	for i, set := range sets {
		ns := namespaces[i]
		objs := readObjects(t, filepath.Join("testdata", "aso-samples", "resourcegroup.yaml"))
		for _, f := range set.files {
			objs = append(objs, readObjects(t, filepath.Join("testdata", "aso-samples", f))...)
		}
		// The PostgreSQL sample's administrator password is a Secret its readers create.
		pw := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-admin-pw"}, StringData: map[string]string{"password": "Sample-pw-1"}}
		if err := c.Create(t.Context(), pw); err != nil {
			t.Fatal(err)
		}
		create(t, c, ns, objs...)
		for _, u := range objs {
			waitReady(t, c, u, 2*time.Minute)
		}
		if set.name == "identity-vault-role" {
			checkVersionsAgree(t, c, ns)
		}
		deleteAll(t, []string{ns}) // the next set reuses the Azure names
		t.Logf("%s: %d objects Ready", set.name, len(objs))
	}
}

// checkVersionsAgree reads an object written at an older version at the stored one and one
// written at the stored version at the older one: the same spec and status either way.
func checkVersionsAgree(t *testing.T, c client.Client, ns string) {
	t.Helper()
	const group = "managedidentity.azure.com"
	at := func(version, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: "UserAssignedIdentity"})
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			t.Fatalf("get %s at %s: %v", name, version, err)
		}
		return u
	}
	agree := func(name string) {
		older, stored := at("v1api20181130", name), at("v1api20230131", name)
		for _, field := range []string{"spec", "status"} {
			if !reflect.DeepEqual(older.Object[field], stored.Object[field]) {
				t.Errorf("%s: %s at v1api20181130 %v, at v1api20230131 %v", name, field, older.Object[field], stored.Object[field])
			}
		}
		if id, _, _ := unstructured.NestedString(older.Object, "status", "clientId"); id == "" {
			t.Errorf("%s read at v1api20181130 has no status.clientId", name)
		}
	}
	agree("sampleuserassignedidentity")

	written := obj(group+"/v1api20230131", "UserAssignedIdentity", "written-at-stored", map[string]any{
		"location": "westcentralus", "owner": map[string]any{"name": "aso-sample-rg"}, "tags": map[string]any{"app": "versions"},
	})
	create(t, c, ns, written)
	waitReady(t, c, written, time.Minute)
	agree("written-at-stored")
	if tags, _, _ := unstructured.NestedStringMap(at("v1api20181130", "written-at-stored").Object, "spec", "tags"); tags["app"] != "versions" {
		t.Errorf("tags written at v1api20230131 read at v1api20181130: %v", tags)
	}
}
