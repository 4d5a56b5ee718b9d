package podidentity_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/metricstest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

func ok[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func kube(t *testing.T) client.Client {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	return ok(client.New(cp.RESTConfig, client.Options{Scheme: podidentitytest.Scheme(t)}))
}

func namespace(t *testing.T, kc client.Client, name string) {
	t.Helper()
	if err := kc.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	podidentitytest.GrantAll(t, kc, name)
}

// Users' aad-pod-identity manifests, as its docs wrote them, apply unchanged with kubectl's
// strict field validation and read back with every field.
func TestUpstreamObjectsApplyUnchanged(t *testing.T) {
	kc := kube(t)
	cp := devenvtest.ControlPlane(t)
	namespace(t, kc, "compat")
	manifest := `apiVersion: "aadpodidentity.k8s.io/v1"
kind: AzureIdentity
metadata:
  name: demo-identity
  namespace: compat
  annotations:
    aadpodidentity.k8s.io/Behavior: namespaced
spec:
  type: 0
  resourceID: /subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/demo
  clientID: 11111111-1111-1111-1111-111111111111
---
apiVersion: "aadpodidentity.k8s.io/v1"
kind: AzureIdentity
metadata:
  name: sp-identity
  namespace: compat
spec:
  type: 1
  tenantID: 22222222-2222-2222-2222-222222222222
  clientID: 33333333-3333-3333-3333-333333333333
  auxiliaryTenantIDs: ["44444444-4444-4444-4444-444444444444"]
  clientPassword: {"name":"sp-secret","namespace":"compat"}
  adResourceID: https://management.azure.com/
  adEndpoint: https://login.microsoftonline.com/
---
apiVersion: "aadpodidentity.k8s.io/v1"
kind: AzureIdentityBinding
metadata:
  name: demo-binding
  namespace: compat
spec:
  azureIdentity: demo-identity
  selector: demo
---
apiVersion: "aadpodidentity.k8s.io/v1"
kind: AzurePodIdentityException
metadata:
  name: proxy-exception
  namespace: compat
spec:
  podLabels:
    app: custom-proxy
    component: proxy
`
	kubectl := filepath.Join(ok(devenv.DefaultBinDir()), "kubectl")
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "--validate=strict", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	var id aadv1.AzureIdentity
	if err := kc.Get(t.Context(), client.ObjectKey{Namespace: "compat", Name: "demo-identity"}, &id); err != nil {
		t.Fatal(err)
	}
	if id.Spec.Type != aadv1.UserAssignedMSI || id.Spec.ClientID != "11111111-1111-1111-1111-111111111111" || !strings.HasSuffix(id.Spec.ResourceID, "/demo") {
		t.Fatalf("identity: %+v", id.Spec)
	}
	var sp aadv1.AzureIdentity
	if err := kc.Get(t.Context(), client.ObjectKey{Namespace: "compat", Name: "sp-identity"}, &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Spec.Type != aadv1.ServicePrincipal || sp.Spec.ClientPassword.Name != "sp-secret" || sp.Spec.TenantID == "" ||
		len(sp.Spec.AuxiliaryTenantIDs) != 1 || sp.Spec.ADResourceID == "" || sp.Spec.ADEndpoint == "" {
		t.Fatalf("service principal identity: %+v", sp.Spec)
	}
	var b aadv1.AzureIdentityBinding
	if err := kc.Get(t.Context(), client.ObjectKey{Namespace: "compat", Name: "demo-binding"}, &b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.AzureIdentity != "demo-identity" || b.Spec.Selector != "demo" {
		t.Fatalf("binding: %+v", b.Spec)
	}
	var ex aadv1.AzurePodIdentityException
	if err := kc.Get(t.Context(), client.ObjectKey{Namespace: "compat", Name: "proxy-exception"}, &ex); err != nil {
		t.Fatal(err)
	}
	if ex.Spec.PodLabels["component"] != "proxy" || len(ex.Spec.PodLabels) != 2 {
		t.Fatalf("exception: %+v", ex.Spec)
	}
	// kubectl's strict validation refuses a misspelt field: the schema is not open-ended.
	cmd = exec.CommandContext(t.Context(), kubectl, "--kubeconfig", cp.Kubeconfig, "apply", "--validate=strict", "-f", "-")
	cmd.Stdin = strings.NewReader(strings.Replace(manifest[:strings.Index(manifest, "---")], "clientID:", "clientId:", 1))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "clientId") {
		t.Fatalf("a misspelt field was accepted: %v %s", err, out)
	}
}

type fleet struct {
	c     *cloud.Cloud
	owner azcore.TokenCredential
	opts  *arm.ClientOptions
	ids   []armmsi.Identity
	pre   armmsi.Identity
	ss    *armcompute.VirtualMachineScaleSetsClient
	ssIDs []string
}

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

// newFleet makes identities id-0..id-(n-1), one pre-assigned identity, and scale sets ss-0 and
// ss-1; ss-0 carries the pre-assigned identity already.
func newFleet(t *testing.T, n int) *fleet {
	t.Helper()
	ctx := t.Context()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := c.Settings()
	f := &fleet{c: c, owner: cloudtest.OwnerCred(t, c), opts: cloudtest.ARMOptions(c)}
	cloudtest.CreateGroup(t, c, f.owner, f.opts, "westeurope", "rg")
	mis := ok(armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, f.owner, f.opts))
	for i := range n + 1 {
		name := fmt.Sprintf("id-%d", i)
		if i == n {
			name = "id-pre"
		}
		mi := ok(mis.CreateOrUpdate(ctx, "rg", name, armmsi.Identity{Location: to.Ptr("westeurope")}, nil))
		if i == n {
			f.pre = mi.Identity
		} else {
			f.ids = append(f.ids, mi.Identity)
		}
	}
	f.ss = ok(armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, f.owner, f.opts))
	for i := range 2 {
		body := armcompute.VirtualMachineScaleSet{Location: to.Ptr("westeurope")}
		if i == 0 {
			body.Identity = &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
				UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*f.pre.ID: {}}}
		}
		p := ok(f.ss.BeginCreateOrUpdate(ctx, "rg", fmt.Sprintf("ss-%d", i), body, nil))
		f.ssIDs = append(f.ssIDs, *ok(p.PollUntilDone(ctx, poll)).ID)
	}
	return f
}

func (f *fleet) identitiesOf(t *testing.T, i int) map[string]bool {
	t.Helper()
	res := ok(f.ss.Get(t.Context(), "rg", fmt.Sprintf("ss-%d", i), nil))
	out := map[string]bool{}
	if res.Identity != nil {
		for id := range res.Identity.UserAssignedIdentities {
			out[strings.ToLower(id)] = true
		}
	}
	return out
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 90*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Pods across two scale sets get every identity with one PATCH per scale set per identity
// change at most (upstream: one per pod, serialised), the pre-assigned identity is used but never
// removed, and the controller's own identities come off when their pods go.
func TestBatchedAssignmentAcrossScaleSets(t *testing.T) {
	kc := kube(t)
	ctx := t.Context()
	f := newFleet(t, 3)
	ns := "batch"
	namespace(t, kc, ns)
	tag := fmt.Sprint(time.Now().UnixNano() % 100000)
	var nodes []string
	for i := range 4 {
		name := fmt.Sprintf("batch-%s-%d", tag, i)
		nodes = append(nodes, name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("azure://%s/virtualMachines/%d", f.ssIDs[i%2], i)}}
		if err := kc.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kc.Delete(context.Background(), node) })
	}
	all := append([]armmsi.Identity{f.pre}, f.ids...)
	for i, mi := range all {
		name := fmt.Sprintf("id-%d", i)
		if err := kc.Create(ctx, &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentitySpec{ResourceID: *mi.ID, ClientID: *mi.Properties.ClientID}}); err != nil {
			t.Fatal(err)
		}
		if err := kc.Create(ctx, &aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: name, Selector: name}}); err != nil {
			t.Fatal(err)
		}
	}
	since := uint64(0)
	if es := f.c.Requests(reqlog.Filter{}); len(es) > 0 {
		since = es[len(es)-1].Seq
	}
	metricsURL := podidentitytest.StartControllerWithMetrics(t, devenvtest.ControlPlane(t).RESTConfig, podidentity.Options{Compute: &podidentity.ARMCompute{
		Credential: f.owner, Options: f.opts, PollFrequency: 20 * time.Millisecond}})
	// The series are the process's (controller-runtime's registry): this test reads changes.
	before := scrape(t, metricsURL)
	const pods = 40
	var created []*corev1.Pod
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%d", i), Labels: map[string]string{aadv1.PodLabel: fmt.Sprintf("id-%d", i%len(all))}},
			Spec: corev1.PodSpec{NodeName: nodes[(i/len(all))%len(nodes)], Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		if err := kc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		created = append(created, p)
	}
	eventually(t, "every pod's identity Assigned", func(ctx context.Context) (bool, error) {
		var list aadv1.AzureAssignedIdentityList
		if err := kc.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		for _, a := range list.Items {
			if a.Status.Status == aadv1.AssignedIDAssigned {
				n++
			}
		}
		return n == pods, nil
	})
	for i := range 2 {
		got := f.identitiesOf(t, i)
		for _, mi := range all {
			if !got[strings.ToLower(*mi.ID)] {
				t.Fatalf("ss-%d lacks %s: %v", i, *mi.Name, got)
			}
		}
	}
	patches := f.c.Requests(reqlog.Filter{Service: "arm", Method: http.MethodPatch, Since: since})
	// Each PATCH adds at least one identity a scale set lacked: 3 for ss-0, 4 for ss-1 at most.
	if len(patches) == 0 || len(patches) > 7 {
		t.Fatalf("%d PATCHes for %d pods on two scale sets", len(patches), pods)
	}
	t.Logf("%d pods on 2 scale sets: %d PATCHes", pods, len(patches))

	for _, p := range created {
		if err := kc.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the assignments gone", func(ctx context.Context) (bool, error) {
		var list aadv1.AzureAssignedIdentityList
		err := kc.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	// The identities came off before their assignments were deleted.
	if a, b := f.identitiesOf(t, 0), f.identitiesOf(t, 1); len(a) != 1 || !a[strings.ToLower(*f.pre.ID)] || len(b) != 0 {
		t.Fatalf("after the pods went: ss-0 %v, ss-1 %v; want only the pre-assigned identity on ss-0", a, b)
	}

	// aad-pod-identity's MIC series on the manager's endpoint: 40 assignments added and
	// deleted, each PATCH the cloud saw timed as vmss_update, the scale sets read, no errors.
	after := scrape(t, metricsURL)
	allPatches := f.c.Requests(reqlog.Filter{Service: "arm", Method: http.MethodPatch, Since: since})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"aadpodidentity_assigned_identity_addition_count", nil, pods},
		{"aadpodidentity_assigned_identity_addition_duration_seconds_count", nil, pods},
		{"aadpodidentity_assigned_identity_deletion_count", nil, pods},
		{"aadpodidentity_assigned_identity_deletion_duration_seconds_count", nil, pods},
		{"aadpodidentity_cloud_provider_operations_duration_seconds_count", []string{`operation_type="vmss_update"`}, float64(len(allPatches))},
		{"aadpodidentity_cloud_provider_operations_duration_seconds_count", []string{`operation_type="vm_update"`}, 0},
		{"aadpodidentity_cloud_provider_operations_errors_count", nil, 0},
		{"aadpodidentity_kubernetes_api_operations_errors_count", nil, 0},
	} {
		if got := metricstest.Sum(after, c.name, c.labels...) - metricstest.Sum(before, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v went up by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := metricstest.Sum(after, "aadpodidentity_cloud_provider_operations_duration_seconds_count", `operation_type="vmss_get"`) -
		metricstest.Sum(before, "aadpodidentity_cloud_provider_operations_duration_seconds_count", `operation_type="vmss_get"`); got < 2 {
		t.Errorf("%v scale set reads timed, want one per scale set at least", got)
	}
}

// In managed mode the identities are already on the nodes: assignments go straight to Assigned
// and ARM is never called.
func TestManagedModeWritesNothingToARM(t *testing.T) {
	kc := kube(t)
	ctx := t.Context()
	ns := "managed"
	namespace(t, kc, ns)
	podidentitytest.StartController(t, devenvtest.ControlPlane(t).RESTConfig, podidentity.Options{Managed: true})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "managed-node"}, Spec: corev1.NodeSpec{
		ProviderID: "azure:///subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-0"}}
	if err := kc.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), node) })
	for _, o := range []client.Object{
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentitySpec{ResourceID: "/subscriptions/x/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/mi", ClientID: "55555555-5555-5555-5555-555555555555"}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "mi", Selector: "mi"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{aadv1.PodLabel: "mi"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the assignment Assigned", func(ctx context.Context) (bool, error) {
		var a aadv1.AzureAssignedIdentity
		err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-managed-mi"}, &a)
		return err == nil && a.Status.Status == aadv1.AssignedIDAssigned && a.Annotations[podidentity.AddedAnnotation] == "", nil
	})
	// The identity is repointed: the assignment is replaced by one for the new identity.
	var id aadv1.AzureIdentity
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mi"}, &id); err != nil {
		t.Fatal(err)
	}
	id.Spec.ResourceID += "-v2"
	if err := kc.Update(ctx, &id); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the assignment for the new identity", func(ctx context.Context) (bool, error) {
		var a aadv1.AzureAssignedIdentity
		err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-managed-mi"}, &a)
		return err == nil && a.Status.Status == aadv1.AssignedIDAssigned && strings.HasSuffix(a.Spec.AzureIdentityRef.Spec.ResourceID, "-v2"), nil
	})
}

// Issue 22 probe 2: in a namespace no grant lists, an AzureIdentity naming another team's
// managed identity, a binding and a pod get nothing: no assignment, no ARM write, a Warning
// Event on the binding naming the grant to add. Once an admin grants the identity the pod gets
// it; when the grant goes, so does the identity, from the assignment and from the scale set.
func TestUngrantedIdentityNeverReachesANode(t *testing.T) {
	kc := kube(t)
	ctx := t.Context()
	f := newFleet(t, 1)
	mi := f.ids[0]
	ns := "ungranted"
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ungranted-node"}, Spec: corev1.NodeSpec{ProviderID: "azure://" + f.ssIDs[1] + "/virtualMachines/0"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thief", Labels: map[string]string{aadv1.PodLabel: "stolen"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, o := range []client.Object{
		node,
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stolen"},
			Spec: aadv1.AzureIdentitySpec{ResourceID: *mi.ID, ClientID: *mi.Properties.ClientID}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stolen"},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "stolen", Selector: "stolen"}},
		pod,
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), node) })
	since := uint64(0)
	if es := f.c.Requests(reqlog.Filter{}); len(es) > 0 {
		since = es[len(es)-1].Seq
	}
	podidentitytest.StartController(t, devenvtest.ControlPlane(t).RESTConfig, podidentity.Options{Compute: &podidentity.ARMCompute{
		Credential: f.owner, Options: f.opts, PollFrequency: 20 * time.Millisecond}})

	var refusal string
	eventually(t, "a Warning Event refusing the identity", func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := kc.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == podidentity.ReasonNotGranted && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "stolen" {
				refusal = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	for _, want := range []string{"NamespaceGrant", "spec.identities", "namespace " + ns, *mi.ID} {
		if !strings.Contains(refusal, want) {
			t.Errorf("refusal %q does not name %q", refusal, want)
		}
	}
	var list aadv1.AzureAssignedIdentityList
	if err := kc.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Fatalf("assignments in an ungranted namespace: %v %v", list.Items, err)
	}
	if w := f.c.Requests(reqlog.Filter{Service: "arm", Method: http.MethodPatch, Since: since}); len(w) != 0 {
		t.Fatalf("%d PATCHes for an ungranted identity", len(w))
	}
	if got := f.identitiesOf(t, 1); got[strings.ToLower(*mi.ID)] {
		t.Fatalf("the ungranted identity is on the scale set: %v", got)
	}

	// The admin grants it (by resource id and client id): the pod gets it.
	grant := &ceruleanv1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "grant-" + ns},
		Spec: ceruleanv1.NamespaceGrantSpec{Namespaces: []string{ns}, Identities: []string{*mi.ID, *mi.Properties.ClientID}}}
	if err := kc.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), grant) })
	eventually(t, "the granted identity Assigned", func(ctx context.Context) (bool, error) {
		var list aadv1.AzureAssignedIdentityList
		err := kc.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 1 && list.Items[0].Status.Status == aadv1.AssignedIDAssigned, err
	})
	if got := f.identitiesOf(t, 1); !got[strings.ToLower(*mi.ID)] {
		t.Fatalf("the granted identity is not on the scale set: %v", got)
	}

	// The grant is withdrawn: the assignment goes and the identity comes off the node.
	if err := kc.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the assignment gone with its grant", func(ctx context.Context) (bool, error) {
		var list aadv1.AzureAssignedIdentityList
		err := kc.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 0, err
	})
	// A pass that began before the withdrawal reached the manager's cache can still hold the
	// identity on; the next pass takes it off.
	eventually(t, "the identity off the scale set after its grant went", func(context.Context) (bool, error) {
		return !f.identitiesOf(t, 1)[strings.ToLower(*mi.ID)], nil
	})
}

// Last in the file: its node names a scale set that does not exist, and a controller of a later
// test could meet what it leaves while it is being removed.
// A node whose scale set does not exist: the read fails, and the MIC series count the failure
// under vmss_get; the pod's assignment stays Created.
func TestCloudFailuresAreCounted(t *testing.T) {
	kc := kube(t)
	ctx := t.Context()
	f := newFleet(t, 1)
	ns := "cloudfail"
	namespace(t, kc, ns)
	gone := strings.TrimSuffix(f.ssIDs[1], "ss-1") + "ss-gone"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cloudfail-node"}, Spec: corev1.NodeSpec{ProviderID: "azure://" + gone + "/virtualMachines/0"}}
	objs := []client.Object{
		node,
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentitySpec{ResourceID: *f.ids[0].ID, ClientID: *f.ids[0].Properties.ClientID}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "mi", Selector: "mi"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{aadv1.PodLabel: "mi"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
	}
	for _, o := range objs {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Everything goes with the test: a pod left on a scale set that does not exist would make
	// the next tests' controllers fail every pass.
	t.Cleanup(func() {
		for _, o := range objs {
			_ = kc.Delete(context.Background(), o, client.GracePeriodSeconds(0))
		}
		var list aadv1.AzureAssignedIdentityList
		if kc.List(context.Background(), &list, client.InNamespace(ns)) == nil {
			for i := range list.Items {
				_ = kc.Delete(context.Background(), &list.Items[i])
			}
		}
	})
	metricsURL := podidentitytest.StartControllerWithMetrics(t, devenvtest.ControlPlane(t).RESTConfig, podidentity.Options{Compute: &podidentity.ARMCompute{
		Credential: f.owner, Options: f.opts, PollFrequency: 20 * time.Millisecond}})
	const failed = "aadpodidentity_cloud_provider_operations_errors_count"
	before := scrape(t, metricsURL)
	eventually(t, "a failed scale set read counted", func(context.Context) (bool, error) {
		body, err := metricstest.Scrape(metricsURL)
		return err == nil && metricstest.Sum(body, failed, `operation_type="vmss_get"`) > metricstest.Sum(before, failed, `operation_type="vmss_get"`), nil
	})
	var a aadv1.AzureAssignedIdentity
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p-" + ns + "-mi"}, &a); err != nil || a.Status.Status != aadv1.AssignedIDCreated {
		t.Fatalf("the assignment on a missing scale set: %+v %v", a.Status, err)
	}
	body := scrape(t, metricsURL)
	if strings.Contains(body, "ss-gone") || strings.Contains(body, f.c.Settings().SubscriptionID) {
		t.Error("the metrics name a resource or a subscription")
	}
}

// scrape reads the manager's metrics endpoint, waiting for it to serve.
func scrape(t *testing.T, url string) string {
	t.Helper()
	var body string
	eventually(t, "the metrics endpoint", func(context.Context) (bool, error) {
		var err error
		body, err = metricstest.Scrape(url)
		return err == nil, nil
	})
	return body
}
