package manager_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// configMapExpressions and secretExpressions (CEL over the resource) are written with the
// values Azure returned; a bad expression is terminal (severity Error) with a message naming it.
func TestExportExpressions(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rg := resourceGroup("cel-rg", nil)
	id := obj(msiAPI, "UserAssignedIdentity", "cel-identity", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "cel-rg"},
		"operatorSpec": map[string]any{
			"configMapExpressions": []any{map[string]any{"name": "cel-out", "key": "client", "value": "self.status.clientId"}},
			"secretExpressions":    []any{map[string]any{"name": "cel-secret", "key": "login", "value": `self.status.tenantId + "/" + self.status.clientId`}},
		},
	})
	bad := obj(msiAPI, "UserAssignedIdentity", "cel-bad", map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "cel-rg"},
		"operatorSpec": map[string]any{
			"configMapExpressions": []any{map[string]any{"name": "cel-bad", "key": "x", "value": "self.status.noSuchField +"}},
		},
	})
	create(t, c, ns, rg, id, bad)
	got := waitReady(t, c, id, time.Minute)
	clientID, _, _ := unstructured.NestedString(got.Object, "status", "clientId")
	tenantID, _, _ := unstructured.NestedString(got.Object, "status", "tenantId")
	cm := &corev1.ConfigMap{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cel-out"}, cm); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cel-secret"}, sec); err != nil {
		t.Fatal(err)
	}
	if cm.Data["client"] != clientID || clientID == "" || string(sec.Data["login"]) != tenantID+"/"+clientID {
		t.Errorf("expressions exported %v and %q; status clientId %q tenantId %q", cm.Data, sec.Data["login"], clientID, tenantID)
	}
	eventually(t, time.Minute, "bad expression reported", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, "cel-bad", bad))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently" && strings.Contains(msg, "cel-bad"),
			st + " " + sev + " " + reason + ": " + msg
	})
}
