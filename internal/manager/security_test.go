package manager_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// listener records every request that reaches it, and whether it carried a bearer token.
type listener struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func recordingListener(t *testing.T) *listener {
	l := &listener{}
	l.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.requests = append(l.requests, r.Method+" "+r.URL.Path+" bearer="+map[bool]string{true: "yes", false: "no"}[strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")])
		l.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"Succeeded","id":"/subscriptions/x/resourceGroups/stolen"}`))
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *listener) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests...)
}

// resumeToken is an Azure SDK resume token of an asynchronous operation polled at url.
func resumeToken(url string) string {
	b, _ := json.Marshal(map[string]any{"type": "json.RawMessage;async", "token": map[string]any{
		"type": "async", "asyncURL": url, "locURL": url, "origURL": url, "method": "PUT", "finalState": "", "state": "InProgress"}})
	return string(b)
}

// annotate merges annotations into an object (with a user annotation, so the change triggers
// a pass as a user's edit would).
func annotate(t *testing.T, c client.Client, u *unstructured.Unstructured, set map[string]string) {
	t.Helper()
	cur := get(t, c, u.GetNamespace(), u.GetName(), u)
	before := cur.DeepCopy()
	a := cur.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range set {
		a[k] = v
	}
	cur.SetAnnotations(a)
	if err := c.Patch(t.Context(), cur, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

func eventReasons(t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}

func eventSeen(t *testing.T, c client.Client, ns, name, typeReason string) (bool, string) {
	got := eventReasons(t, c, ns, name)
	for _, r := range got {
		if r == typeReason {
			return true, ""
		}
	}
	return false, "events: " + strings.Join(got, ", ")
}

// Probe A: a resume token naming another host, another resource group on ARM, or the cloud's
// admin API is never followed (for an update or a delete): it is dropped with a Warning, no
// request reaches another host, and status shows only the object's own resource.
func TestResumeTokenCannotRedirect(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rec := recordingListener(t)
	arm := strings.TrimSuffix(az.Settings().ResourceManagerEndpoint, "/")
	victim := cloudtest.CreateGroup(t, az, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az), "westus2", "other-group")

	targets := map[string]string{
		"listener": rec.URL + "/subscriptions/" + az.Settings().SubscriptionID + "/providers/Microsoft.Resources/operationStatuses/x",
		"victim":   arm + victim,
		"admin":    arm + "/admin/requests",
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			rg := resourceGroup("token-"+name, nil)
			create(t, c, ns, rg)
			waitReady(t, c, rg, time.Minute)
			annotate(t, c, rg, map[string]string{armresource.AnnotationPollerToken: resumeToken(target), armresource.AnnotationPollerID: "other", "test/poke": "1"})
			eventually(t, time.Minute, "token dropped", func() (bool, string) {
				u := get(t, c, ns, rg.GetName(), rg)
				if _, ok := u.GetAnnotations()[armresource.AnnotationPollerToken]; ok {
					return false, "token still there"
				}
				return eventSeen(t, c, ns, rg.GetName(), "Warning/ResumeTokenDropped")
			})
			u := waitReady(t, c, rg, time.Minute)
			if id, _, _ := unstructured.NestedString(u.Object, "status", "id"); !strings.HasSuffix(id, "/resourceGroups/token-"+name) {
				t.Errorf("status.id is %q, not the object's own group", id)
			}
			// The same for a deletion.
			annotate(t, c, rg, map[string]string{armresource.AnnotationPollerToken: resumeToken(target), armresource.AnnotationPollerID: "delete"})
			if err := c.Delete(t.Context(), rg); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, rg, time.Minute)
			if groupExists(t, az, "token-"+name) {
				t.Errorf("the object's own group was not deleted")
			}
		})
	}
	if got := rec.seen(); len(got) != 0 {
		t.Errorf("requests reached another host: %v", got)
	}
	if !groupExists(t, az, "other-group") {
		t.Error("the victim group was deleted")
	}
}

// Probe B: a resource-id annotation naming another resource group never redirects a delete:
// the id deleted is the spec's, the victim survives, and the disagreement is reported.
func TestResourceIDAnnotationCannotRedirectDelete(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	victim := cloudtest.CreateGroup(t, az, cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az), "westus2", "id-victim")

	own := resourceGroup("id-own", nil)
	create(t, c, ns, own)
	waitReady(t, c, own, time.Minute)
	since := az.RequestLog().Last()
	// Set with no other change (no pass runs), then delete at once: the probe.
	u := get(t, c, ns, own.GetName(), own)
	before := u.DeepCopy()
	a := u.GetAnnotations()
	a[armresource.AnnotationResourceID] = victim
	u.SetAnnotations(a)
	if err := c.Patch(t.Context(), u, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(t.Context(), own); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, own, time.Minute)
	if !groupExists(t, az, "id-victim") {
		t.Fatal("the victim group named by the annotation was deleted")
	}
	if groupExists(t, az, "id-own") {
		t.Error("the object's own group was left in Azure")
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "DELETE", PathPrefix: victim, Since: since}); n != 0 {
		t.Errorf("%d DELETEs of the victim reached ARM", n)
	}

	// On a live object, the annotation is reported and replaced.
	other := resourceGroup("id-other", nil)
	create(t, c, ns, other)
	waitReady(t, c, other, time.Minute)
	annotate(t, c, other, map[string]string{armresource.AnnotationResourceID: victim, "test/poke": "1"})
	eventually(t, time.Minute, "annotation reported and replaced", func() (bool, string) {
		id := get(t, c, ns, "id-other", other).GetAnnotations()[armresource.AnnotationResourceID]
		if !strings.HasSuffix(id, "/resourceGroups/id-other") {
			return false, "annotation " + id
		}
		return eventSeen(t, c, ns, "id-other", "Warning/ResourceIDIgnored")
	})
}

// A bad export expression is a spec error found before any ARM write: nothing is created.
func TestBadExpressionCreatesNothing(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	rg := obj(rgAPI, "ResourceGroup", "bad-expression", map[string]any{"location": "westus2", "operatorSpec": map[string]any{
		"configMapExpressions": []any{map[string]any{"name": "out", "key": "k", "value": "self.status.id +"}}}})
	create(t, c, ns, rg)
	eventually(t, time.Minute, "terminal", func() (bool, string) {
		st, sev, reason, msg := ready(get(t, c, ns, rg.GetName(), rg))
		return st == "False" && sev == "Error" && reason == "ReconciliationFailedPermanently", st + " " + sev + " " + reason + ": " + msg
	})
	if groupExists(t, az, "bad-expression") {
		t.Error("the group was created in Azure despite the bad expression")
	}
	if n := az.RequestLog().Count(reqlog.Filter{Service: "arm", Method: "PUT"}); n != 0 {
		t.Errorf("%d PUTs reached ARM", n)
	}
}

// An object owning itself, and two owning each other, end terminal (severity Error) with a
// message naming the cycle.
func TestOwnerCycles(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	ra := func(name, owner string) *unstructured.Unstructured {
		return obj("authorization.azure.com/v1api20220401", "RoleAssignment", name, map[string]any{
			"owner":       map[string]any{"name": owner, "group": "authorization.azure.com", "kind": "RoleAssignment"},
			"principalId": "00000000-0000-0000-0000-000000000001", "roleDefinitionReference": map[string]any{"wellKnownName": "Reader"}})
	}
	create(t, c, ns, ra("self", "self"), ra("ra-a", "ra-b"), ra("ra-b", "ra-a"))
	for name, want := range map[string]string{
		"self": "RoleAssignment self names itself as its owner",
		"ra-a": "RoleAssignment ra-a → RoleAssignment ra-b → RoleAssignment ra-a",
		"ra-b": "RoleAssignment ra-b → RoleAssignment ra-a → RoleAssignment ra-b",
	} {
		eventually(t, time.Minute, name+" cycle", func() (bool, string) {
			st, sev, reason, msg := ready(get(t, c, ns, name, ra(name, "")))
			return st == "False" && sev == "Error" && strings.Contains(msg, want), st + " " + sev + " " + reason + ": " + msg
		})
	}
}

// Deleting a namespace deletes its Azure resources and completes, though the namespace's
// credential Secrets (aso-credential and one named by credential-from) are deleted with it.
func TestNamespaceDeletionWithCredentialSecrets(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	startManager(t, az, time.Minute, ns)
	s := az.Settings()
	data := map[string][]byte{"AZURE_SUBSCRIPTION_ID": []byte(s.SubscriptionID), "AZURE_TENANT_ID": []byte(s.TenantID),
		"AZURE_CLIENT_ID": []byte(s.ClientID), "AZURE_CLIENT_SECRET": []byte(s.ClientSecret)}
	for _, name := range []string{credentials.NamespaceSecretName, "named-cred"} {
		if err := c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	byNamespace := resourceGroup("ns-cred-rg", nil)
	byAnnotation := resourceGroup("named-cred-rg", map[string]string{credentials.AnnotationCredentialFrom: "named-cred"})
	create(t, c, ns, byNamespace, byAnnotation)
	waitReady(t, c, byNamespace, time.Minute)
	waitReady(t, c, byAnnotation, time.Minute)

	if err := c.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "namespace gone", func() (bool, string) {
		n := &corev1.Namespace{}
		err := c.Get(t.Context(), client.ObjectKey{Name: ns}, n)
		if err != nil {
			return client.IgnoreNotFound(err) == nil, err.Error()
		}
		return false, "namespace " + string(n.Status.Phase)
	})
	for _, g := range []string{"ns-cred-rg", "named-cred-rg"} {
		if groupExists(t, az, g) {
			t.Errorf("group %s is still in Azure", g)
		}
	}
}
