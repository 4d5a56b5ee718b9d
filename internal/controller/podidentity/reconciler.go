// Package podidentity is the assignment controller of aad-pod-identity's API (upstream's MIC):
// for every pod that a binding selects it keeps an AzureAssignedIdentity, and it keeps the
// identities those need on the node's VM or scale set, in one PATCH per resource per pass.
package podidentity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
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
	"github.com/cerulean/cerulean/internal/controller/patch"
	"github.com/cerulean/cerulean/internal/controller/record"
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
	registerMetrics()
	r := &Reconciler{c: mgr.GetClient(), rec: record.New(mgr.GetEventRecorder("cerulean-podidentity")), opts: opts}
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

// gathered is what one pass reads: the resource's nodes, the assignments its pods need and
// those that exist, by namespace/name of the AzureAssignedIdentity.
type gathered struct {
	comp     *podidentity.Compute
	want     map[string]desired
	existing map[string]*aadv1.AzureAssignedIdentity
}

// Reconcile brings one VM or scale set and the AzureAssignedIdentities of its nodes' pods in
// line: gather, plan (pure), then apply (create, assign in ARM, delete, record).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("compute", req.Name))
	g, err := r.gather(ctx, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	// Before any Azure call: a pod gets only identities its namespace was granted.
	if err := r.dropUngranted(ctx, g.want); err != nil {
		return ctrl.Result{}, err
	}
	pl := planAssignments(g.want, g.existing)
	if err := parallel(ctx, pl.create, func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		start := time.Now()
		err := r.c.Create(ctx, a)
		if apierrors.IsAlreadyExists(err) {
			return nil // created by an earlier pass whose cache was behind: record leaves it to the next pass
		}
		observeWrite(opAddition, start, err)
		if err != nil {
			return fmt.Errorf("create assigned identity: %w", err)
		}
		return nil
	}); err != nil {
		return ctrl.Result{}, err
	}
	out, err := r.assign(ctx, g.comp, pl)
	if err != nil {
		return ctrl.Result{}, err
	}
	behind, err := r.deleteStale(ctx, g.comp, pl.stale, out.removals)
	if err != nil {
		return ctrl.Result{}, err
	}
	result := ctrl.Result{}
	if pl.replaced || behind {
		result.RequeueAfter = time.Second
	}
	return r.record(ctx, g, pl, out, result)
}

// gather lists the resource's nodes, their pods' matches and their assignments.
func (r *Reconciler) gather(ctx context.Context, key string) (gathered, error) {
	g := gathered{want: map[string]desired{}, existing: map[string]*aadv1.AzureAssignedIdentity{}}
	var nodes corev1.NodeList
	if err := r.c.List(ctx, &nodes); err != nil {
		return g, fmt.Errorf("list nodes: %w", err)
	}
	var nodeNames []string
	for i := range nodes.Items {
		if keyOf(&nodes.Items[i]) != key {
			continue
		}
		nodeNames = append(nodeNames, nodes.Items[i].Name)
		if c, err := podidentity.ParseProviderID(nodes.Items[i].Spec.ProviderID); err == nil {
			g.comp = &c
		}
	}
	if name, ok := strings.CutPrefix(key, nodeKeyPrefix); ok && !slices.Contains(nodeNames, name) {
		nodeNames = append(nodeNames, name) // a deleted node: clean up its assignments
	}
	var bindings aadv1.AzureIdentityBindingList
	if err := r.c.List(ctx, &bindings); err != nil {
		return g, fmt.Errorf("list bindings: %w", err)
	}
	var ids aadv1.AzureIdentityList
	if err := r.c.List(ctx, &ids); err != nil {
		return g, fmt.Errorf("list identities: %w", err)
	}
	for _, node := range nodeNames {
		var pods corev1.PodList
		if err := r.c.List(ctx, &pods, client.MatchingFields{indexPodNode: node}); err != nil {
			return g, fmt.Errorf("list pods: %w", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, m := range podidentity.Matches(p, bindings.Items, ids.Items) {
				g.want[p.Namespace+"/"+AssignedName(p, m.Binding)] = desired{pod: p, match: m}
			}
		}
		var assigned aadv1.AzureAssignedIdentityList
		if err := r.c.List(ctx, &assigned, client.MatchingFields{indexAssignedNode: node}); err != nil {
			return g, fmt.Errorf("list assigned identities: %w", err)
		}
		for i := range assigned.Items {
			a := &assigned.Items[i]
			g.existing[a.Namespace+"/"+a.Name] = a
		}
	}
	return g, nil
}

// assignPlan is what a pass changes in Kubernetes: assignments to create, stale ones to delete
// (after their identities leave the resource), the identities the resource must carry.
type assignPlan struct {
	keep     map[string]*aadv1.AzureAssignedIdentity // every wanted assignment, existing or created
	create   []*aadv1.AzureAssignedIdentity
	stale    []*aadv1.AzureAssignedIdentity
	needed   map[string]string // lower-case identity id -> id
	added    map[string]bool   // identities the controller put on the resource (earlier)
	replaced bool              // an assignment's identity changed: recreate it next pass
}

// planAssignments compares the wanted assignments with those that exist. Pure.
func planAssignments(want map[string]desired, existing map[string]*aadv1.AzureAssignedIdentity) assignPlan {
	pl := assignPlan{keep: map[string]*aadv1.AzureAssignedIdentity{}, needed: map[string]string{}, added: map[string]bool{}}
	for k, a := range existing {
		d, ok := want[k]
		if !ok || a.Spec.AzureIdentityRef == nil || !strings.EqualFold(a.Spec.AzureIdentityRef.Spec.ResourceID, d.match.Identity.Spec.ResourceID) {
			pl.stale = append(pl.stale, a)
			// An identity that changed is deleted in this pass, created in the next (same name).
			pl.replaced = pl.replaced || ok
			continue
		}
		pl.keep[k] = a
	}
	slices.SortFunc(pl.stale, func(a, b *aadv1.AzureAssignedIdentity) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for k, d := range want {
		if _, stale := existing[k]; stale && pl.keep[k] == nil {
			continue
		}
		if pl.keep[k] == nil {
			pl.keep[k] = newAssigned(d)
			pl.create = append(pl.create, pl.keep[k])
		}
		if id := pl.keep[k].Spec.AzureIdentityRef.Spec.ResourceID; id != "" {
			pl.needed[strings.ToLower(id)] = id
		}
	}
	for _, a := range pl.keep {
		if a.Annotations[AddedAnnotation] == "true" {
			pl.added[strings.ToLower(a.Spec.AzureIdentityRef.Spec.ResourceID)] = true
		}
	}
	return pl
}

// identityChanges are the additions to and removals from the resource's identities: what is
// needed and not on it, and what only stale assignments the controller made needed. Pure.
func identityChanges(needed map[string]string, stale []*aadv1.AzureAssignedIdentity, cur map[string]string) (adds, removals []string) {
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
	return adds, removals
}

// assigned is what the ARM step did: failures by lower-case identity id, identities added,
// identities removed.
type assigned struct {
	failed   map[string]error
	added    map[string]bool
	removals []string
}

// assign puts the needed identities on the resource and takes the stale ones off, in one PATCH.
func (r *Reconciler) assign(ctx context.Context, comp *podidentity.Compute, pl assignPlan) (assigned, error) {
	out := assigned{failed: map[string]error{}, added: pl.added}
	switch {
	case r.opts.Managed:
		return out, nil
	case comp == nil:
		for lid := range pl.needed {
			out.failed[lid] = fmt.Errorf("node has no Azure spec.providerID (a VM or scale-set instance); cannot assign identities")
		}
		return out, nil
	}
	start := time.Now()
	system, current, err := r.opts.Compute.Identities(ctx, *comp)
	observeCloud(cloudOperation(*comp, false), start, err)
	if err != nil {
		return out, fmt.Errorf("read identities of %s: %w", comp.ID, err)
	}
	cur := map[string]string{}
	for _, id := range current {
		cur[strings.ToLower(id)] = id
	}
	adds, removals := identityChanges(pl.needed, pl.stale, cur)
	out.removals = removals
	if len(adds) == 0 && len(removals) == 0 {
		return out, nil
	}
	done, errs := r.patch(ctx, *comp, system, len(cur), adds, removals)
	for lid, err := range errs {
		out.failed[lid] = err
	}
	for _, id := range done {
		out.added[strings.ToLower(id)] = true
	}
	if len(errs) > 0 && len(done) == 0 && len(adds) == 0 {
		return out, fmt.Errorf("remove identities from %s: %w", comp.ID, firstErr(errs))
	}
	return out, nil
}

// deleteStale deletes stale assignments once their identities are off the resource. It deletes
// only the version the pass read: a newer one (an earlier pass recorded that it added the
// identity, and this pass's cache had not seen it) stays for the next pass, which takes the
// identity off first; behind reports that.
func (r *Reconciler) deleteStale(ctx context.Context, comp *podidentity.Compute, stale []*aadv1.AzureAssignedIdentity, removals []string) (behind bool, err error) {
	var mu sync.Mutex
	if err := parallel(ctx, stale, func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		start := time.Now()
		err := r.c.Delete(ctx, a, client.Preconditions{UID: &a.UID, ResourceVersion: &a.ResourceVersion})
		switch {
		case apierrors.IsNotFound(err):
			return nil // deleted by an earlier pass whose cache was behind: counted then
		case apierrors.IsConflict(err):
			mu.Lock()
			behind = true
			mu.Unlock()
			return nil
		}
		observeWrite(opDeletion, start, err)
		if err != nil {
			return fmt.Errorf("delete assigned identity: %w", err)
		}
		return nil
	}); err != nil {
		return false, err
	}
	for _, a := range stale {
		if slices.ContainsFunc(removals, func(id string) bool { return strings.EqualFold(id, a.Spec.AzureIdentityRef.Spec.ResourceID) }) {
			r.rec.Eventf(a.Spec.AzureBindingRef, nil, corev1.EventTypeNormal, ReasonUnassigned, "Unassign",
				"Removed identity %s from %s: no pod on it needs it any more", a.Spec.AzureIdentityRef.Spec.ResourceID, comp.ID)
		}
	}
	return behind, nil
}

// record moves each kept assignment to Assigned, or records why not: one patch of what changed
// (status and annotations) per assignment, through the shared patch helper. The patch is
// locked to the version the pass read: from an older one it would overwrite what a later pass
// recorded (that it added the identity, so it must take it off), and the identity would stay on
// the node after its last pod; the next pass, reading the newer version, writes instead.
func (r *Reconciler) record(ctx context.Context, g gathered, pl assignPlan, out assigned, result ctrl.Result) (ctrl.Result, error) {
	var mu sync.Mutex
	// comeBackIn keeps the soonest of the passes the assignments ask for.
	comeBackIn := func(d time.Duration) {
		mu.Lock()
		if result.RequeueAfter == 0 || d < result.RequeueAfter {
			result.RequeueAfter = d
		}
		mu.Unlock()
	}
	err := parallel(ctx, slices.Collect(maps.Values(pl.keep)), func(ctx context.Context, a *aadv1.AzureAssignedIdentity) error {
		if a.ResourceVersion == "" { // its create found it there: this pass has not read it
			comeBackIn(time.Second)
			return nil
		}
		b := a.DeepCopy()
		ph, err := patch.New(r.c, a, patch.WithoutStatusSubresource(), patch.WithOptimisticLock())
		if err != nil {
			return err
		}
		if wait := assignmentState(a, g.comp, r.opts.Managed, out); wait {
			comeBackIn(r.opts.RetryAfter)
		}
		if !ph.Changed(a) {
			return nil
		}
		if err := ph.Patch(ctx, a); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				comeBackIn(time.Second)
				return nil
			}
			kubeErrors.WithLabelValues(opUpdateStatus).Inc()
			return fmt.Errorf("update assigned identity: %w", err)
		}
		switch {
		case a.Status.Status == aadv1.AssignedIDAssigned && b.Status.Status != aadv1.AssignedIDAssigned:
			r.rec.Eventf(a, a.Spec.AzureBindingRef, corev1.EventTypeNormal, ReasonAssigned, "Assign", "Identity %s assigned for pod %s/%s",
				a.Spec.AzureIdentityRef.Spec.ResourceID, a.Spec.PodNamespace, a.Spec.Pod)
		case a.Status.Status != aadv1.AssignedIDAssigned && b.Status.Message != a.Status.Message:
			r.rec.Eventf(a, a.Spec.AzureBindingRef, corev1.EventTypeWarning, ReasonAssignmentFailed, "Assign", "Identity %s not assigned for pod %s/%s: %s",
				a.Spec.AzureIdentityRef.Spec.ResourceID, a.Spec.PodNamespace, a.Spec.Pod, a.Status.Message)
		}
		return nil
	})
	return result, err
}

// assignmentState sets an assignment's status and annotations from the ARM step; it reports
// whether the assignment failed (the pass comes back after RetryAfter). Pure.
func assignmentState(a *aadv1.AzureAssignedIdentity, comp *podidentity.Compute, managed bool, out assigned) bool {
	lid := strings.ToLower(a.Spec.AzureIdentityRef.Spec.ResourceID)
	if a.Annotations == nil {
		a.Annotations = map[string]string{}
	}
	if err := out.failed[lid]; err != nil {
		a.Status.Status, a.Status.Message = aadv1.AssignedIDCreated, clipMsg(err.Error())
		return true
	}
	a.Status.Status, a.Status.Message = aadv1.AssignedIDAssigned, ""
	if comp != nil && !managed {
		a.Annotations[ComputeAnnotation] = comp.ID
		a.Annotations[AddedAnnotation] = fmt.Sprint(out.added[lid])
	}
	return false
}

// patch makes one PATCH with every addition and removal; when Azure refuses it naming some of
// the identities added (not found, no assign permission), those fail and the PATCH is made again
// without them, so one bad identity does not block the others. It returns the ids added and the
// failures by lower-case id.
func (r *Reconciler) patch(ctx context.Context, comp podidentity.Compute, system bool, current int, adds, removals []string) ([]string, map[string]error) {
	failed := map[string]error{}
	for {
		remaining := current + len(adds) - len(removals)
		start := time.Now()
		err := r.opts.Compute.Update(ctx, comp, system, adds, removals, remaining)
		observeCloud(cloudOperation(comp, true), start, err)
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
