package manager_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// staleObject reads one object as a manager's cache that has not yet seen the controller's
// own last writes: while frozen is set, Gets of that object return it. Everything else is read
// live from the API server.
type staleObject struct {
	client.Client
	frozen *unstructured.Unstructured
}

func (s *staleObject) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && s.frozen != nil && key == client.ObjectKeyFromObject(s.frozen) {
		s.frozen.DeepCopyInto(u)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// A pass that reads an ARM object older than the controller's own last write (a cache behind
// the API server) writes nothing from it: another writer's finalizer, the applied hash and
// Ready stay as they are, and the pass asks to run again.
func TestStaleReadsOverwriteNothing(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	settings, err := credentials.SettingsFromConfig(azureConfig(az))
	if err != nil {
		t.Fatal(err)
	}
	armOpts, err := azureConfig(az).ARMOptions()
	if err != nil {
		t.Fatal(err)
	}
	var kind armresource.Kind
	for _, k := range armresource.Kinds() {
		if k.GVK.Kind == "ResourceGroup" {
			kind = k
		}
	}
	reads := &staleObject{Client: c}
	r := armresource.New(reads, armresource.Options{Kind: kind, Credentials: credentials.NewResolver(c, settings), ARM: armOpts,
		Exports: exports.NewKubeWriter(c), Recorder: events.NewFakeRecorder(100), SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond})

	rg := resourceGroup("stale-rg", nil)
	create(t, c, ns, rg)
	const keep = "example.com/keep"
	t.Cleanup(func() { // no manager runs here to release the object
		u := resourceGroup("stale-rg", nil)
		u.SetNamespace(ns)
		_ = c.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = c.Delete(context.Background(), u)
	})
	asCreated := get(t, c, ns, rg.GetName(), rg)
	pass := func(what string) reconcile.Result {
		t.Helper()
		res, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(rg)})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return res
	}

	pass("first pass")
	done := get(t, c, ns, rg.GetName(), rg)
	hash := done.GetAnnotations()[armresource.AnnotationAppliedHash]
	if st, _, _, _ := ready(done); st != "True" || hash == "" || !slices.Contains(done.GetFinalizers(), armresource.Finalizer) {
		t.Fatalf("after the first pass: Ready %s, hash %q, finalizers %v", st, hash, done.GetFinalizers())
	}
	// Another controller (or a user) adds a finalizer of its own.
	done.SetFinalizers(append(done.GetFinalizers(), keep))
	if err := c.Update(t.Context(), done); err != nil {
		t.Fatal(err)
	}

	// A pass that still sees the object as it was created: no finalizer, no hash, no status.
	reads.frozen = asCreated
	if res := pass("pass on a stale read"); res.RequeueAfter == 0 {
		t.Errorf("a pass on a stale read asked for no next pass: %+v", res)
	}
	after := get(t, c, ns, rg.GetName(), rg)
	if !slices.Contains(after.GetFinalizers(), keep) || !slices.Contains(after.GetFinalizers(), armresource.Finalizer) {
		t.Errorf("a pass on a stale read overwrote the finalizers: %v", after.GetFinalizers())
	}
	if got := after.GetAnnotations()[armresource.AnnotationAppliedHash]; got != hash {
		t.Errorf("a pass on a stale read changed the applied hash: %q, was %q", got, hash)
	}
	if st, _, reason, _ := ready(after); st != "True" {
		t.Errorf("a pass on a stale read changed Ready: %s %s", st, reason)
	}

	// The next pass reads the current object and keeps everything.
	reads.frozen = nil
	pass("pass on a current read")
	after = get(t, c, ns, rg.GetName(), rg)
	if st, _, _, _ := ready(after); st != "True" || !slices.Contains(after.GetFinalizers(), keep) {
		t.Errorf("after a current read: Ready %s, finalizers %v", st, after.GetFinalizers())
	}
}
