package podidentity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
)

// staleAssignments reads AzureAssignedIdentities as a manager's cache that has not yet seen the
// controller's own last writes: while frozen holds them, lists return the versions the
// controller created. Everything else is read live from the API server.
type staleAssignments struct {
	client.Client
	created []aadv1.AzureAssignedIdentity // as each was just after its create
	frozen  bool
}

func (s *staleAssignments) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := s.Client.Create(ctx, obj, opts...)
	if a, ok := obj.(*aadv1.AzureAssignedIdentity); ok && err == nil {
		s.created = append(s.created, *a.DeepCopy())
	}
	return err
}

func (s *staleAssignments) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*aadv1.AzureAssignedIdentityList)
	if !ok {
		return s.Client.List(ctx, list, opts...)
	}
	items := s.created
	if !s.frozen {
		var all aadv1.AzureAssignedIdentityList
		if err := s.Client.List(ctx, &all); err != nil {
			return err
		}
		items = all.Items
	}
	// The API server cannot select on spec.nodename (the manager's cache indexes it): filter here.
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	l.Items = nil
	for _, a := range items {
		if lo.FieldSelector == nil || lo.FieldSelector.Matches(nodeNameField(a.Spec.NodeName)) {
			l.Items = append(l.Items, *a.DeepCopy())
		}
	}
	return nil
}

type nodeNameField string

func (n nodeNameField) Has(string) bool   { return true }
func (n nodeNameField) Get(string) string { return string(n) }

// A pass that reads an assignment older than the one an earlier pass wrote (a cache behind the
// API server) neither overwrites what that pass recorded nor deletes the assignment without
// taking its identity off: when the pod goes, the identity leaves the scale set.
func TestStaleReadsNeverLeaveAnIdentityOnTheNode(t *testing.T) {
	kc := kube(t)
	ctx := t.Context()
	f := newFleet(t, 1)
	mi := f.ids[0]
	ns := "stale"
	namespace(t, kc, ns)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stale-node"}, Spec: corev1.NodeSpec{ProviderID: "azure://" + f.ssIDs[1] + "/virtualMachines/0"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: map[string]string{aadv1.PodLabel: "mi"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, o := range []client.Object{
		node,
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentitySpec{ResourceID: *mi.ID, ClientID: *mi.Properties.ClientID}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mi"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "mi", Selector: "mi"}},
		pod,
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), node) })

	reads := &staleAssignments{Client: kc}
	r := podidentity.NewReconciler(reads, events.NewFakeRecorder(100), podidentity.Options{
		Compute:    &podidentity.ARMCompute{Credential: f.owner, Options: f.opts, PollFrequency: 20 * time.Millisecond},
		RetryAfter: time.Second,
	})
	pass := func(what string) reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: strings.ToLower(f.ssIDs[1])}})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}
	name := podidentity.AssignedName(pod, &aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Name: "mi"}})
	addedMark := func() string {
		t.Helper()
		var a aadv1.AzureAssignedIdentity
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &a); err != nil {
			t.Fatal(err)
		}
		return a.Annotations[podidentity.AddedAnnotation]
	}
	onScaleSet := func() bool { return f.identitiesOf(t, 1)[strings.ToLower(*mi.ID)] }

	pass("first pass")
	if !onScaleSet() || addedMark() != "true" {
		t.Fatalf("after the first pass: on the scale set %v, %s=%q", onScaleSet(), podidentity.AddedAnnotation, addedMark())
	}

	// A pass that still sees the assignment as created, before the first pass recorded it.
	reads.frozen = true
	if res := pass("pass on a stale read"); res.RequeueAfter == 0 {
		t.Errorf("a pass on a stale read asked for no next pass")
	}
	if got := addedMark(); got != "true" {
		t.Fatalf("a pass on a stale read overwrote %s: %q", podidentity.AddedAnnotation, got)
	}

	// The pod goes, and the next pass still reads the old assignment: it must not delete it
	// without taking the identity off.
	if err := kc.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	pass("pass on a stale read after the pod went")
	reads.frozen = false
	pass("pass on a current read")
	if onScaleSet() {
		t.Fatalf("the identity stayed on the scale set after its last pod went")
	}
	var a aadv1.AzureAssignedIdentity
	if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &a); err == nil {
		t.Fatalf("the assignment outlived its pod: %+v", a.ObjectMeta)
	}
}
