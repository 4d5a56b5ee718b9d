// Package podidentity is the assignment controller of aad-pod-identity's API (upstream's MIC):
// for every pod that a binding selects it keeps an AzureAssignedIdentity, and it keeps the
// identities those need on the node's VM or scale set, in one PATCH per resource per pass.
package podidentity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/podidentity"
)

// Annotations the controller writes on AzureAssignedIdentities.
const (
	// AddedAnnotation is "true" when the controller put the identity on the node's VM or scale
	// set, "false" when it was there already: only identities it added are ever removed.
	AddedAnnotation = "aadpodidentity.cerulean.dev/added-by-controller"
	// ComputeAnnotation is the ARM id of the VM or scale set the identity is assigned to.
	ComputeAnnotation = "aadpodidentity.cerulean.dev/compute"
)

// Event reasons.
const (
	ReasonAssigned         = "IdentityAssigned"
	ReasonAssignmentFailed = "IdentityAssignmentFailed"
	ReasonUnassigned       = "IdentityUnassigned"
)

// Options configure the controller.
type Options struct {
	// Compute makes the ARM calls; unused in managed mode.
	Compute Compute
	// Managed is upstream's managed mode: identities are already on the nodes; no ARM writes.
	Managed bool
	// RetryAfter is how long a failed assignment waits before the next pass (default 30s).
	RetryAfter time.Duration
	// AllowUngrantedIdentities assigns identities whatever the NamespaceGrants say
	// (upstream's behaviour); by default a pod gets only identities its namespace was granted.
	AllowUngrantedIdentities bool
}

// Reconciler reconciles one VM or scale set (or, for a node without an Azure provider id, one
// node): the request's Name is its key.
type Reconciler struct {
	c    client.Client
	rec  events.EventRecorder
	opts Options
}

const (
	indexPodNode      = "spec.nodeName"
	indexAssignedNode = "spec.nodename"
	nodeKeyPrefix     = "node:"
)

// +kubebuilder:rbac:groups=aadpodidentity.k8s.io,resources=azureidentities;azureidentitybindings;azurepodidentityexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=aadpodidentity.k8s.io,resources=azureassignedidentities,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the controller, its indexes and watches with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 30 * time.Second
	}
	if !opts.Managed && opts.Compute == nil {
		return fmt.Errorf("set up pod identity controller: no ARM client outside managed mode")
	}
	r := &Reconciler{c: mgr.GetClient(), rec: mgr.GetEventRecorder("cerulean-podidentity"), opts: opts}
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexPodNode, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	if err := idx.IndexField(ctx, &aadv1.AzureAssignedIdentity{}, indexAssignedNode, func(o client.Object) []string {
		return []string{o.(*aadv1.AzureAssignedIdentity).Spec.NodeName}
	}); err != nil {
		return fmt.Errorf("index assigned identities by node: %w", err)
	}
	all := handler.EnqueueRequestsFromMapFunc(r.allKeys)
	return ctrl.NewControllerManagedBy(mgr).
		Named("azureassignedidentity").
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: keyOf(o.(*corev1.Node))}}}
		})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.nodeKey(ctx, o.(*corev1.Pod).Spec.NodeName)
		})).
		Watches(&aadv1.AzureAssignedIdentity{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.nodeKey(ctx, o.(*aadv1.AzureAssignedIdentity).Spec.NodeName)
		})).
		Watches(&aadv1.AzureIdentityBinding{}, all).
		Watches(&aadv1.AzureIdentity{}, all).
		Watches(&ceruleanv1.NamespaceGrant{}, all).
		Complete(r)
}

// keyOf is the reconcile key of a node: its VM or scale set id, else node:NAME.
func keyOf(n *corev1.Node) string {
	if c, err := podidentity.ParseProviderID(n.Spec.ProviderID); err == nil {
		return strings.ToLower(c.ID)
	}
	return nodeKeyPrefix + n.Name
}

func (r *Reconciler) nodeKey(ctx context.Context, node string) []reconcile.Request {
	if node == "" {
		return nil
	}
	var n corev1.Node
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nodeKeyPrefix + node}}}
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: keyOf(&n)}}}
}

func (r *Reconciler) allKeys(ctx context.Context, _ client.Object) []reconcile.Request {
	var nodes corev1.NodeList
	if err := r.c.List(ctx, &nodes); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	for i := range nodes.Items {
		if k := keyOf(&nodes.Items[i]); !seen[k] {
			seen[k] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: k}})
		}
	}
	return out
}

// AssignedName is the AzureAssignedIdentity's name for pod and binding (upstream's
// POD-NAMESPACE-BINDING), hashed when too long for a name.
func AssignedName(pod *corev1.Pod, b *aadv1.AzureIdentityBinding) string {
	n := pod.Name + "-" + pod.Namespace + "-" + b.Name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(pod.Namespace + "/" + pod.Name + "/" + b.Namespace + "/" + b.Name))
	return n[:200] + "-" + hex.EncodeToString(sum[:8])
}

type desired struct {
	pod   *corev1.Pod
	match podidentity.Match
}

// Reconcile brings one VM or scale set and the AzureAssignedIdentities of its nodes' pods in line.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	key := req.Name
	logger := log.FromContext(ctx).WithValues("compute", key)
	ctx = log.IntoContext(ctx, logger)

	var nodes corev1.NodeList
	if err := r.c.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	var nodeNames []string
	var comp *podidentity.Compute
	for i := range nodes.Items {
		if keyOf(&nodes.Items[i]) != key {
			continue
		}
		nodeNames = append(nodeNames, nodes.Items[i].Name)
		if c, err := podidentity.ParseProviderID(nodes.Items[i].Spec.ProviderID); err == nil {
			comp = &c
		}
	}
	if name, ok := strings.CutPrefix(key, nodeKeyPrefix); ok && !slices.Contains(nodeNames, name) {
		nodeNames = append(nodeNames, name) // a deleted node: clean up its assignments
	}
	var bindings aadv1.AzureIdentityBindingList
	if err := r.c.List(ctx, &bindings); err != nil {
		return ctrl.Result{}, fmt.Errorf("list bindings: %w", err)
	}
	var ids aadv1.AzureIdentityList
	if err := r.c.List(ctx, &ids); err != nil {
		return ctrl.Result{}, fmt.Errorf("list identities: %w", err)
	}
	want := map[string]desired{} // namespace/name of the AzureAssignedIdentity
	existing := map[string]*aadv1.AzureAssignedIdentity{}
	for _, node := range nodeNames {
		var pods corev1.PodList
		if err := r.c.List(ctx, &pods, client.MatchingFields{indexPodNode: node}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list pods: %w", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			matches, err := r.granted(ctx, p, podidentity.Matches(p, bindings.Items, ids.Items))
			if err != nil {
				return ctrl.Result{}, err
			}
			for _, m := range matches {
				want[p.Namespace+"/"+AssignedName(p, m.Binding)] = desired{pod: p, match: m}
			}
		}
		var assigned aadv1.AzureAssignedIdentityList
		if err := r.c.List(ctx, &assigned, client.MatchingFields{indexAssignedNode: node}); err != nil {
			return ctrl.Result{}, fmt.Errorf("list assigned identities: %w", err)
		}
		for i := range assigned.Items {
			a := &assigned.Items[i]
			existing[a.Namespace+"/"+a.Name] = a
		}
	}

	// Create what is missing (Created), and find what is no longer wanted.
	var stale []*aadv1.AzureAssignedIdentity
	replaced := false
	for k, a := range existing {
		d, ok := want[k]
		if !ok || a.Spec.AzureIdentityRef == nil || !strings.EqualFold(a.Spec.AzureIdentityRef.Spec.ResourceID, d.match.Identity.Spec.ResourceID) {
			stale = append(stale, a)
			delete(existing, k)
			if ok {
				// Its identity changed: delete it in this pass, create the new one in the next
				// (same name).
				delete(want, k)
				replaced = true
			}
		}
	}
	var toCreate []*aadv1.AzureAssignedIdentity
	for k, d := range want {
		if existing[k] == nil {
			existing[k] = newAssigned(d)
			toCreate = append(toCreate, existing[k])
		}
	}
	if err := parallel(ctx, toCreate, func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		if err := r.c.Create(ctx, a); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create assigned identity: %w", err)
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}

	// The identities the resource must carry, and those only stale assignments needed.
	needed := map[string]string{} // lower-case id -> id
	for k := range want {
		if id := existing[k].Spec.AzureIdentityRef.Spec.ResourceID; id != "" {
			needed[strings.ToLower(id)] = id
		}
	}
	result := ctrl.Result{}
	if replaced {
		result.RequeueAfter = time.Second
	}
	failed := map[string]error{}
	added := map[string]bool{} // identities the controller put on the resource (now or earlier)
	for _, a := range existing {
		if a.Annotations[AddedAnnotation] == "true" {
			added[strings.ToLower(a.Spec.AzureIdentityRef.Spec.ResourceID)] = true
		}
	}
	var removals []string
	switch {
	case r.opts.Managed:
	case comp == nil:
		for lid := range needed {
			failed[lid] = fmt.Errorf("node has no Azure spec.providerID (a VM or scale-set instance); cannot assign identities")
		}
	default:
		system, current, err := r.opts.Compute.Identities(ctx, *comp)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("read identities of %s: %w", comp.ID, err)
		}
		cur := map[string]string{}
		for _, id := range current {
			cur[strings.ToLower(id)] = id
		}
		var adds []string
		for lid, id := range needed {
			if _, ok := cur[lid]; !ok {
				adds = append(adds, id)
			}
		}
		for _, a := range stale {
			lid := strings.ToLower(a.Spec.AzureIdentityRef.Spec.ResourceID)
			if _, stillNeeded := needed[lid]; stillNeeded || a.Annotations[AddedAnnotation] != "true" || slices.Contains(removals, cur[lid]) {
				continue
			}
			if id, on := cur[lid]; on {
				removals = append(removals, id)
			}
		}
		slices.Sort(adds)
		slices.Sort(removals)
		if len(adds) > 0 || len(removals) > 0 {
			done, errs := r.patch(ctx, *comp, system, len(cur), adds, removals)
			for lid, err := range errs {
				failed[lid] = err
			}
			for _, id := range done {
				added[strings.ToLower(id)] = true
			}
			if len(errs) > 0 && len(done) == 0 && len(adds) == 0 {
				return ctrl.Result{}, fmt.Errorf("remove identities from %s: %w", comp.ID, firstErr(errs))
			}
		}
	}

	// Delete stale assignments once their identities are off the resource.
	if err := parallel(ctx, stale, func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		if err := r.c.Delete(ctx, a); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete assigned identity: %w", err)
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	for _, a := range stale {
		if slices.ContainsFunc(removals, func(id string) bool { return strings.EqualFold(id, a.Spec.AzureIdentityRef.Spec.ResourceID) }) {
			r.rec.Eventf(a.Spec.AzureBindingRef, nil, corev1.EventTypeNormal, ReasonUnassigned, "Unassign",
				"Removed identity %s from %s: no pod on it needs it any more", a.Spec.AzureIdentityRef.Spec.ResourceID, comp.ID)
		}
	}
	// Move the others to Assigned, or record why not.
	var toUpdate []*aadv1.AzureAssignedIdentity
	before := map[*aadv1.AzureAssignedIdentity]*aadv1.AzureAssignedIdentity{}
	for k := range want {
		a := existing[k]
		lid := strings.ToLower(a.Spec.AzureIdentityRef.Spec.ResourceID)
		b := a.DeepCopy()
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		if err := failed[lid]; err != nil {
			a.Status.Status, a.Status.Message = aadv1.AssignedIDCreated, clipMsg(err.Error())
			result.RequeueAfter = r.opts.RetryAfter
		} else {
			a.Status.Status, a.Status.Message = aadv1.AssignedIDAssigned, ""
			if comp != nil && !r.opts.Managed {
				a.Annotations[ComputeAnnotation] = comp.ID
				a.Annotations[AddedAnnotation] = fmt.Sprint(added[lid])
			}
		}
		if b.Status == a.Status && maps(b.Annotations, a.Annotations) {
			continue
		}
		before[a] = b
		toUpdate = append(toUpdate, a)
	}
	var mu sync.Mutex
	if err := parallel(ctx, toUpdate, func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		if err := r.c.Update(ctx, a); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				mu.Lock()
				result.RequeueAfter = time.Second
				mu.Unlock()
				return nil
			}
			return fmt.Errorf("update assigned identity: %w", err)
		}
		b := before[a]
		switch {
		case a.Status.Status == aadv1.AssignedIDAssigned && b.Status.Status != aadv1.AssignedIDAssigned:
			r.rec.Eventf(a, a.Spec.AzureBindingRef, corev1.EventTypeNormal, ReasonAssigned, "Assign", "Identity %s assigned for pod %s/%s",
				a.Spec.AzureIdentityRef.Spec.ResourceID, a.Spec.PodNamespace, a.Spec.Pod)
		case a.Status.Status != aadv1.AssignedIDAssigned && b.Status.Message != a.Status.Message:
			r.rec.Eventf(a, a.Spec.AzureBindingRef, corev1.EventTypeWarning, ReasonAssignmentFailed, "Assign", "Identity %s not assigned for pod %s/%s: %s",
				a.Spec.AzureIdentityRef.Spec.ResourceID, a.Spec.PodNamespace, a.Spec.Pod, a.Status.Message)
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// patch makes one PATCH with every addition and removal; when Azure refuses it naming some of
// the identities added (not found, no assign permission), those fail and the PATCH is made again
// without them, so one bad identity does not block the others. It returns the ids added and the
// failures by lower-case id.
func (r *Reconciler) patch(ctx context.Context, comp podidentity.Compute, system bool, current int, adds, removals []string) ([]string, map[string]error) {
	failed := map[string]error{}
	for {
		remaining := current + len(adds) - len(removals)
		err := r.opts.Compute.Update(ctx, comp, system, adds, removals, remaining)
		if err == nil {
			return adds, failed
		}
		msg := strings.ToLower(err.Error())
		var rest []string
		for _, id := range adds {
			if strings.Contains(msg, strings.ToLower(id)) {
				failed[strings.ToLower(id)] = err
			} else {
				rest = append(rest, id)
			}
		}
		if len(rest) == len(adds) { // not attributable: everything failed
			for _, id := range adds {
				failed[strings.ToLower(id)] = err
			}
			if len(adds) == 0 {
				failed[""] = err
			}
			return nil, failed
		}
		log.FromContext(ctx).Info("Identity assignment refused for some identities; retrying without them", "failed", len(adds)-len(rest))
		adds = rest
		if len(adds) == 0 && len(removals) == 0 {
			return nil, failed
		}
	}
}

// writers bounds the concurrent writes of one pass.
const writers = 16

// parallel runs fn for every item, writers at a time, and returns the first error.
func parallel[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(writers)
	for _, it := range items {
		g.Go(func() error { return fn(ctx, it) })
	}
	return g.Wait()
}

func firstErr(m map[string]error) error {
	for _, e := range m {
		return e
	}
	return nil
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func clipMsg(s string) string {
	if len(s) > 1024 {
		return s[:1024] + "…"
	}
	return s
}

func newAssigned(d desired) *aadv1.AzureAssignedIdentity {
	id := d.match.Identity.DeepCopy()
	id.ObjectMeta = metav1.ObjectMeta{Name: id.Name, Namespace: id.Namespace, UID: id.UID}
	id.TypeMeta = metav1.TypeMeta{APIVersion: aadv1.GroupVersion.String(), Kind: "AzureIdentity"}
	id.Spec.ClientPassword = corev1.SecretReference{}
	b := d.match.Binding.DeepCopy()
	b.ObjectMeta = metav1.ObjectMeta{Name: b.Name, Namespace: b.Namespace, UID: b.UID}
	b.TypeMeta = metav1.TypeMeta{APIVersion: aadv1.GroupVersion.String(), Kind: "AzureIdentityBinding"}
	a := &aadv1.AzureAssignedIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: AssignedName(d.pod, d.match.Binding), Namespace: d.pod.Namespace},
		Spec: aadv1.AzureAssignedIdentitySpec{AzureIdentityRef: id, AzureBindingRef: b, Pod: d.pod.Name,
			PodNamespace: d.pod.Namespace, NodeName: d.pod.Spec.NodeName},
		Status: aadv1.AzureAssignedIdentityStatus{Status: aadv1.AssignedIDCreated},
	}
	// No owner reference: garbage collection would delete it before the controller could take
	// its identity off the VM or scale set; the controller deletes it itself.
	return a
}
