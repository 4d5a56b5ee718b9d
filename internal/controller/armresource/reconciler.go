// Package armresource is the generic ARM-resource reconciler: one controller per kind, driven
// by a small per-kind adapter (Kind) that says where the resource lives in ARM, how its spec
// becomes a request body and what it exports. It writes to ARM only when needed (a changed
// spec, or drift a GET shows), resumes long-running operations across restarts from the
// object's annotations, requests a fresh token for every PUT and DELETE, and deletes in Azure
// only when the Kubernetes object is deleted and its policy allows it.
package armresource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cerulean/cerulean/api/shared"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// Annotations and the finalizer, Azure Service Operator's names (so objects move between the
// two managers unchanged), and the one of Cerulean's own.
const (
	AnnotationReconcilePolicy = "serviceoperator.azure.com/reconcile-policy"
	AnnotationResourceID      = "serviceoperator.azure.com/resource-id"
	AnnotationPollerToken     = "serviceoperator.azure.com/poller-resume-token"
	AnnotationPollerID        = "serviceoperator.azure.com/poller-resume-id"
	// AnnotationAppliedHash identifies the last request body ARM accepted: a spec whose body
	// hashes the same needs no PUT.
	AnnotationAppliedHash = "cerulean.dev/applied-hash"
	// AnnotationExportKeyVault chooses where a resource's secret exports go: a Key Vault URL, or
	// "kubernetes" for Secrets whatever the manager-wide setting.
	AnnotationExportKeyVault = "cerulean.dev/export-key-vault"
	Finalizer                = "serviceoperator.azure.com/finalizer"
)

// Reconcile policies.
const (
	PolicyManage         = "manage"
	PolicySkip           = "skip"
	PolicyDetachOnDelete = "detach-on-delete"
)

// pollerDelete is the poller-resume-id of a DELETE.
const pollerDelete = "delete"

// Options configure a Reconciler.
type Options struct {
	// Kind is the adapter of the reconciled kind.
	Kind Kind
	// Credentials resolves the credential of each object.
	Credentials *credentials.Resolver
	// ARM are the ARM client options (endpoint, transport, retries).
	ARM *arm.ClientOptions
	// Exports writes ConfigMaps and Secrets.
	Exports *exports.KubeWriter
	// KeyVault writes secret exports to a Key Vault, when one is the destination.
	KeyVault *exports.KeyVaultWriter
	// ExportKeyVault is the manager-wide Key Vault destination of secret exports (a vault URL);
	// empty keeps them in Kubernetes Secrets. The annotation AnnotationExportKeyVault overrides it.
	ExportKeyVault string
	// APIReader reads without the cache: the CRD's state must be current when an object is
	// being deleted (its CRD is marked deleted before the objects are). Nil reads through the
	// client.
	APIReader client.Reader
	// Recorder records Events on transitions.
	Recorder events.EventRecorder
	// SyncPeriod is how often a Ready resource is read back from ARM (default 1h).
	SyncPeriod time.Duration
	// PollInterval is the longest wait between polls of a running operation (default 10s);
	// ARM's Retry-After makes it shorter.
	PollInterval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// AllowUngrantedScopes turns off the NamespaceGrant check of resources reconciled with the
	// global credential (Azure Service Operator's behaviour: that credential is trusted
	// cluster-wide).
	AllowUngrantedScopes bool
}

// Reconciler reconciles one kind.
type Reconciler struct {
	client.Client
	opts Options

	mu       sync.Mutex
	failures map[types.UID]int
	roles    sync.Map // subscription/lower(role name) → role definition id
}

// New returns a reconciler of opts.Kind using c.
func New(c client.Client, opts Options) *Reconciler {
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = time.Hour
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Reconciler{Client: c, opts: opts, failures: map[types.UID]int{}}
}

func (r *Reconciler) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.opts.Kind.GVK)
	return u
}

// Reconcile brings one object's Azure resource to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("kind", r.opts.Kind.GVK.Kind))
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		if err := r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) { controllerutil.AddFinalizer(o, Finalizer) }); err != nil {
			return ctrl.Result{}, err
		}
	}
	origStatus, _, _ := unstructured.NestedMap(obj.Object, "status")
	p := &pass{r: r, obj: obj, status: map[string]any{}}
	outcome := p.run(ctx)
	if err := r.writeStatus(ctx, obj, origStatus, p.status, p.armSeen, outcome); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: outcome.Requeue}, nil
}

// pass is one reconciliation of one object.
type pass struct {
	r       *Reconciler
	obj     *unstructured.Unstructured
	cred    *credentials.Credential
	id      string
	status  map[string]any // ARM's view, in the status shape
	armSeen bool           // status holds a fresh ARM view
}

// run executes the phases and returns the Ready outcome.
func (p *pass) run(ctx context.Context) Outcome {
	r := p.r
	err := p.phases(ctx)
	if err == nil {
		r.resetBackoff(p.obj.GetUID())
		return Outcome{Status: metav1.ConditionTrue, Severity: shared.SeverityNone, Reason: shared.ReasonSucceeded, Requeue: r.opts.SyncPeriod}
	}
	var inProgress *progressError
	if errors.As(err, &inProgress) {
		return Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonReconciling, Message: inProgress.msg, Requeue: r.pollAfter(inProgress.wait)}
	}
	o := classify(err, r.opts.SyncPeriod, r.backoff(p.obj.GetUID()))
	log.FromContext(ctx).V(1).Info("Reconcile did not finish", "reason", o.Reason, "error", err.Error())
	return o
}

// progressError is an operation still running: not a failure. wait is ARM's Retry-After.
type progressError struct {
	msg  string
	wait time.Duration
}

// pollAfter is when a running operation is polled again: when ARM's Retry-After asks, as the
// SDK's pollers and Azure Service Operator do, but never later than PollInterval.
func (r *Reconciler) pollAfter(advertised time.Duration) time.Duration {
	if advertised > 0 && advertised < r.opts.PollInterval {
		return advertised
	}
	return r.opts.PollInterval
}

func (e *progressError) Error() string { return e.msg }

func (p *pass) phases(ctx context.Context) error {
	policy := p.obj.GetAnnotations()[AnnotationReconcilePolicy]
	cred, err := p.r.opts.Credentials.For(ctx, p.obj)
	if errors.Is(err, credentials.ErrInvalidCredential) {
		return fmt.Errorf("%w: %w", errInvalidSpec, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errCredential, err)
	}
	p.cred = cred
	if p.id, err = p.r.armID(ctx, p.obj, cred); err != nil {
		return tokenFailure(cred, err)
	}
	if err := p.r.checkGrants(ctx, p.obj, cred, p.id); err != nil {
		return err
	}
	if policy == PolicySkip {
		return tokenFailure(cred, p.observe(ctx))
	}
	return tokenFailure(cred, p.apply(ctx))
}

// tokenFailure marks an error of getting the credential's token (Entra refused the secret,
// certificate or federated exchange) as the credential's, naming its source: it is fixed in
// that secret or in Azure, not in the resource's spec.
func tokenFailure(cred *credentials.Credential, err error) error {
	var authErr *azidentity.AuthenticationFailedError
	if errors.As(err, &authErr) {
		return fmt.Errorf("%w: get a token for the %s credential (client %s): %w", errCredential, cred.Source, cred.ClientID, err)
	}
	return err
}

// observe is the skip policy: read only.
func (p *pass) observe(ctx context.Context) error {
	reader, err := newARMClient(p.cred.Cached(), p.r.opts.ARM)
	if err != nil {
		return err
	}
	res, err := reader.get(ctx, p.id, p.r.opts.Kind.APIVersion)
	if isNotFound(err) {
		return fmt.Errorf("%w: %s does not exist in Azure and the reconcile policy is skip", errNotInAzure, p.id)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p.id, err)
	}
	return p.finish(ctx, reader, res)
}

var errNotInAzure = errors.New("azure resource not found")

// apply makes ARM hold the spec: resume a running operation, PUT when the body changed or ARM
// drifted, otherwise one GET.
func (p *pass) apply(ctx context.Context) error {
	k := p.r.opts.Kind
	body, err := p.r.body(ctx, p.obj, p.cred)
	if err != nil {
		return err
	}
	hash := bodyHash(body)
	reader, err := newARMClient(p.cred.Cached(), p.r.opts.ARM)
	if err != nil {
		return err
	}
	ann := p.obj.GetAnnotations()
	if token := ann[AnnotationPollerToken]; token != "" && ann[AnnotationPollerID] != pollerDelete {
		res, done, err := p.r.resume(ctx, p.obj, reader, token)
		if !done {
			return err
		}
		if err != nil {
			return fmt.Errorf("create or update %s: %w", p.id, err)
		}
		if ann[AnnotationPollerID] == hash && res != nil {
			return p.finish(ctx, reader, res)
		}
	}
	if p.obj.GetAnnotations()[AnnotationAppliedHash] == hash {
		res, err := reader.get(ctx, p.id, k.APIVersion)
		switch {
		case isNotFound(err):
			log.FromContext(ctx).Info("Resource missing in Azure; creating it again", "id", p.id)
		case err != nil:
			return fmt.Errorf("read %s: %w", p.id, err)
		default:
			where := drifted(body, res)
			if where == "" {
				return p.finish(ctx, reader, res)
			}
			log.FromContext(ctx).Info("Azure resource drifted; updating it", "id", p.id, "field", where)
		}
	}
	res, err := p.put(ctx, body, hash)
	if err != nil {
		return err
	}
	return p.finish(ctx, reader, res)
}

// put sends the PUT with a fresh credential and waits for a short operation; a long one is
// recorded on the object (resume token) and left running.
func (p *pass) put(ctx context.Context, body map[string]any, hash string) (map[string]any, error) {
	fresh, err := p.cred.Fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCredential, err)
	}
	writer, err := newARMClient(fresh, p.r.opts.ARM)
	if err != nil {
		return nil, err
	}
	poller, wait, err := writer.beginPut(ctx, p.id, p.r.opts.Kind.APIVersion, body)
	if err != nil {
		return nil, fmt.Errorf("create or update %s: %w", p.id, err)
	}
	if !poller.Done() {
		token, err := poller.ResumeToken()
		if err != nil {
			return nil, fmt.Errorf("record operation: %w", err)
		}
		if err := p.r.patchMeta(ctx, p.obj, func(o *unstructured.Unstructured) {
			setAnnotations(o, map[string]string{AnnotationResourceID: p.id, AnnotationPollerToken: token, AnnotationPollerID: hash})
		}); err != nil {
			return nil, err
		}
		return nil, &progressError{msg: "The resource is being created or updated in Azure", wait: wait}
	}
	raw, err := poller.Result(ctx)
	if err != nil {
		return nil, fmt.Errorf("create or update %s: %w", p.id, err)
	}
	res, err := decodeResource(raw)
	if err != nil {
		return nil, err
	}
	if err := p.r.patchMeta(ctx, p.obj, func(o *unstructured.Unstructured) {
		setAnnotations(o, map[string]string{AnnotationResourceID: p.id, AnnotationAppliedHash: hash, AnnotationPollerToken: "", AnnotationPollerID: ""})
	}); err != nil {
		return nil, err
	}
	return res, nil
}

// resume polls a recorded PUT once. done is false while it runs (err is then a progressError).
// When it ended, the token is cleared and, on success, its body hash marked applied.
func (r *Reconciler) resume(ctx context.Context, obj *unstructured.Unstructured, reader *armClient, token string) (map[string]any, bool, error) {
	poller, err := reader.resume(token)
	if err != nil {
		_ = r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) {
			setAnnotations(o, map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""})
		})
		return nil, true, err
	}
	done, wait, err := step(ctx, poller)
	if !done {
		if err != nil {
			return nil, false, err
		}
		return nil, false, &progressError{msg: "The resource is being created or updated in Azure", wait: wait}
	}
	var res map[string]any
	if err == nil {
		raw, rerr := poller.Result(ctx)
		if rerr == nil {
			res, _ = decodeResource(raw)
		}
	}
	id := obj.GetAnnotations()[AnnotationPollerID]
	perr := r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) {
		set := map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""}
		if err == nil {
			set[AnnotationAppliedHash] = id
		}
		setAnnotations(o, set)
	})
	if err == nil && perr != nil {
		err = perr
	}
	return res, true, err
}

func decodeResource(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var res map[string]any
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decode ARM resource: %w", err)
	}
	return res, nil
}

// finish records ARM's view as status and writes the exports; Ready follows only when every
// export is written.
func (p *pass) finish(ctx context.Context, reader *armClient, res map[string]any) error {
	if res == nil {
		var err error
		if res, err = reader.get(ctx, p.id, p.r.opts.Kind.APIVersion); err != nil {
			return fmt.Errorf("read %s: %w", p.id, err)
		}
	}
	p.status = statusFromARM(res, p.r.opts.Kind.Flatten)
	p.armSeen = true
	if p.obj.GetAnnotations()[AnnotationResourceID] == "" {
		if err := p.r.patchMeta(ctx, p.obj, func(o *unstructured.Unstructured) {
			setAnnotations(o, map[string]string{AnnotationResourceID: p.id})
		}); err != nil {
			return err
		}
	}
	return p.r.export(ctx, p.obj, p.status, &exportEnv{reader: reader, id: p.id, apiVersion: p.r.opts.Kind.APIVersion, cred: p.cred})
}

// export writes operatorSpec's configMaps, secrets and expressions.
func (r *Reconciler) export(ctx context.Context, obj *unstructured.Unstructured, status map[string]any, env *exportEnv) error {
	var vals []exports.Value
	if r.opts.Kind.Exports != nil {
		v, err := r.opts.Kind.Exports(ctx, env, obj, status)
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		vals = append(vals, v...)
	}
	exprs := expressions(obj)
	if len(exprs) > 0 {
		self := obj.DeepCopy().Object
		st := deepCopy(status).(map[string]any)
		self["status"] = st
		secret, err := r.secretValues(ctx, env, exprs)
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		v, err := exports.EvaluateWith(self, secret, exprs)
		if errors.Is(err, exports.ErrExpression) {
			return fmt.Errorf("%w: %w", errInvalidSpec, err) // fixed only by a spec change
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errExport, err)
		}
		vals = append(vals, v...)
	}
	if len(vals) == 0 {
		return nil
	}
	if vault := r.exportVault(obj); vault != "" {
		var kube []exports.Value
		secret := map[string]string{}
		for _, v := range vals {
			if v.Kind == "Secret" {
				secret[v.Key] = v.Value
			} else {
				kube = append(kube, v)
			}
		}
		if len(secret) > 0 {
			name := exports.KeyVaultSecretName(obj.GetKind(), obj.GetNamespace(), obj.GetName())
			if err := r.opts.KeyVault.Write(ctx, env.cred.Cached(), vault, name, secret); err != nil {
				return fmt.Errorf("%w: %w", errExport, err)
			}
		}
		vals = kube
	}
	if len(vals) == 0 {
		return nil
	}
	if err := r.opts.Exports.Write(ctx, obj, vals); err != nil {
		return fmt.Errorf("%w: %w", errExport, err)
	}
	return nil
}

// secretValues are the kind's secret values when a Secret expression may read them, else nil.
func (r *Reconciler) secretValues(ctx context.Context, env *exportEnv, exprs []exports.Expression) (map[string]string, error) {
	if r.opts.Kind.SecretValues == nil {
		return nil, nil
	}
	for _, e := range exprs {
		if e.Kind == exports.KindSecret {
			return r.opts.Kind.SecretValues(ctx, env)
		}
	}
	return nil, nil
}

// exportVault is the Key Vault URL secret exports go to, "" for Kubernetes Secrets.
func (r *Reconciler) exportVault(obj *unstructured.Unstructured) string {
	v, ok := obj.GetAnnotations()[AnnotationExportKeyVault]
	if !ok {
		v = r.opts.ExportKeyVault
	}
	if strings.EqualFold(v, "kubernetes") || r.opts.KeyVault == nil {
		return ""
	}
	return v
}

func expressions(obj *unstructured.Unstructured) []exports.Expression {
	var out []exports.Expression
	for _, f := range []struct{ field, kind string }{{"configMapExpressions", "ConfigMap"}, {"secretExpressions", "Secret"}} {
		list, _, _ := unstructured.NestedSlice(obj.Object, "spec", "operatorSpec", f.field)
		for _, e := range list {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			key, _ := m["key"].(string)
			val, _ := m["value"].(string)
			out = append(out, exports.Expression{Destination: exports.Destination{Kind: f.kind, Name: name, Key: key}, Expr: val})
		}
	}
	return out
}

// writeStatus writes status once: ARM's view when this pass read it (else the old one), and
// the Ready condition; only when it changed. An Event marks a transition of Ready.
func (r *Reconciler) writeStatus(ctx context.Context, obj *unstructured.Unstructured, orig, armView map[string]any, seen bool, o Outcome) error {
	next := map[string]any{}
	if seen {
		for k, v := range armView {
			next[k] = v
		}
	} else {
		for k, v := range orig {
			if k != "conditions" {
				next[k] = deepCopy(v)
			}
		}
	}
	conds := conditionsOf(orig)
	conds, transition := setReady(conds, o, obj.GetGeneration(), r.opts.Now())
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		C []shared.Condition `json:"c"`
	}{conds})
	if err != nil {
		return fmt.Errorf("encode conditions: %w", err)
	}
	next["conditions"] = raw["c"]
	if equality.Semantic.DeepEqual(normalize(orig), normalize(next)) {
		return nil
	}
	obj.Object["status"] = next
	if err := r.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if transition && r.opts.Recorder != nil {
		typ := corev1.EventTypeNormal
		if o.Severity == shared.SeverityWarning || o.Severity == shared.SeverityError {
			typ = corev1.EventTypeWarning
		}
		msg := o.Message
		if msg == "" {
			msg = "Ready is " + string(o.Status)
		}
		r.opts.Recorder.Eventf(obj, nil, typ, o.Reason, "Reconcile", "%s", msg)
	}
	return nil
}

// normalize round-trips through JSON so numbers compare equal whatever their Go type.
func normalize(m map[string]any) any {
	b, _ := json.Marshal(m)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func conditionsOf(status map[string]any) []shared.Condition {
	raw, ok := status["conditions"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var conds []shared.Condition
	_ = json.Unmarshal(b, &conds)
	return conds
}

// patchMeta applies mutate to obj's metadata with a merge patch.
func (r *Reconciler) patchMeta(ctx context.Context, obj *unstructured.Unstructured, mutate func(*unstructured.Unstructured)) error {
	orig := obj.DeepCopy()
	mutate(obj)
	if equality.Semantic.DeepEqual(orig.GetAnnotations(), obj.GetAnnotations()) && equality.Semantic.DeepEqual(orig.GetFinalizers(), obj.GetFinalizers()) {
		return nil
	}
	status := obj.Object["status"]
	if err := r.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patch metadata: %w", err)
	}
	if status != nil {
		obj.Object["status"] = status
	}
	return nil
}

// setAnnotations sets (or with "" removes) annotations.
func setAnnotations(o *unstructured.Unstructured, set map[string]string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range set {
		if v == "" {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	o.SetAnnotations(a)
}

func (r *Reconciler) backoff(uid types.UID) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.failures[uid]
	r.failures[uid] = n + 1
	d := time.Second << min(n, 8)
	return min(d, 5*time.Minute)
}

func (r *Reconciler) resetBackoff(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failures, uid)
}

// azureName is the resource's name in Azure.
func (r *Reconciler) azureName(obj *unstructured.Unstructured) string {
	if n, _, _ := unstructured.NestedString(obj.Object, "spec", "azureName"); n != "" {
		return n
	}
	if r.opts.Kind.DefaultName != nil {
		return r.opts.Kind.DefaultName(obj)
	}
	return obj.GetName()
}

// armID resolves the owner and builds the resource's ARM id.
func (r *Reconciler) armID(ctx context.Context, obj *unstructured.Unstructured, cred *credentials.Credential) (string, error) {
	k := r.opts.Kind
	name := r.azureName(obj)
	if k.Owner == OwnerSubscription {
		return "/subscriptions/" + cred.SubscriptionID + "/resourceGroups/" + name, nil
	}
	owner, _, _ := unstructured.NestedMap(obj.Object, "spec", "owner")
	parent, err := r.ownerID(ctx, obj.GetNamespace(), owner)
	if err != nil {
		return "", err
	}
	if sub := subscriptionOf(parent); sub != "" && !strings.EqualFold(sub, cred.SubscriptionID) {
		return "", fmt.Errorf("%w: the owner is in subscription %s, the credential (%s) in %s", errSubscription, sub, cred.Source, cred.SubscriptionID)
	}
	switch k.Owner {
	case OwnerChild:
		return parent + "/" + k.ChildSegment + "/" + name, nil
	default:
		return parent + "/providers/" + k.ARMType + "/" + name, nil
	}
}

func subscriptionOf(id string) string {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) >= 2 && strings.EqualFold(parts[0], "subscriptions") {
		return parts[1]
	}
	return ""
}

// ownerID is the owner's ARM id: given, or read from the owner object once it is Ready.
func (r *Reconciler) ownerID(ctx context.Context, namespace string, owner map[string]any) (string, error) {
	if id, _ := owner["armId"].(string); id != "" {
		return strings.TrimSuffix(id, "/"), nil
	}
	name, _ := owner["name"].(string)
	gk, err := r.ownerKind(owner)
	if err != nil {
		return "", err
	}
	return r.readyID(ctx, namespace, gk.Group, gk.Kind, name, errWaitingForOwner, errOwnerNotFound)
}

// readyID reads the ARM id of a Ready object of one of our kinds.
func (r *Reconciler) readyID(ctx context.Context, namespace, group, kind, name string, notReady, notFound error) (string, error) {
	gvk, ok := servedGVK(group, kind)
	if !ok {
		return "", fmt.Errorf("%w: %s.%s is not a kind Cerulean manages", errReference, kind, group)
	}
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: %s %s/%s does not exist", notFound, kind, namespace, name)
		}
		return "", fmt.Errorf("read %s %s: %w", kind, name, err)
	}
	status, _, _ := unstructured.NestedMap(o.Object, "status")
	ready := readyCondition(conditionsOf(status))
	id, _ := status["id"].(string)
	if ready == nil || ready.Status != metav1.ConditionTrue || id == "" {
		return "", fmt.Errorf("%w: %s %s is not Ready yet", notReady, kind, name)
	}
	return id, nil
}

func (r *Reconciler) ownerKind(owner map[string]any) (gk schema.GroupKind, err error) {
	k := r.opts.Kind
	if k.Owner == OwnerScope {
		gk.Group, _ = owner["group"].(string)
		gk.Kind, _ = owner["kind"].(string)
		return gk, nil
	}
	gk.Group, gk.Kind = k.OwnerKinds[0].Group, k.OwnerKinds[0].Kind
	return gk, nil
}

// servedGVK maps a group and kind to the version the manager reads.
func servedGVK(group, kind string) (schema.GroupVersionKind, bool) {
	for _, k := range Kinds() {
		if strings.EqualFold(k.GVK.Group, group) && strings.EqualFold(k.GVK.Kind, kind) {
			return k.GVK, true
		}
	}
	return schema.GroupVersionKind{}, false
}

// body builds the request body from the spec.
func (r *Reconciler) body(ctx context.Context, obj *unstructured.Unstructured, cred *credentials.Credential) (map[string]any, error) {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	body, err := armBody(spec, r.opts.Kind.Flatten, func(name, key string) (string, error) {
		cm := &corev1.ConfigMap{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return "", fmt.Errorf("%w: ConfigMap %s does not exist", errConfigMap, name)
			}
			return "", fmt.Errorf("read ConfigMap %s: %w", name, err)
		}
		v, ok := cm.Data[key]
		if !ok {
			return "", fmt.Errorf("%w: ConfigMap %s has no key %s", errConfigMap, name, key)
		}
		return v, nil
	})
	if err != nil {
		return nil, err
	}
	if r.opts.Kind.Prepare != nil {
		env := &prepareEnv{r: r, cred: cred, namespace: obj.GetNamespace()}
		if err := r.opts.Kind.Prepare(ctx, env, body); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// prepareEnv is what Prepare may use.
type prepareEnv struct {
	r         *Reconciler
	cred      *credentials.Credential
	namespace string
}

// roleID resolves a role name to its definition id in the credential's subscription.
func (e *prepareEnv) roleID(ctx context.Context, name string) (string, error) {
	key := e.cred.SubscriptionID + "/" + strings.ToLower(name)
	if id, ok := e.r.roles.Load(key); ok {
		return id.(string), nil
	}
	c, err := newARMClient(e.cred.Cached(), e.r.opts.ARM)
	if err != nil {
		return "", err
	}
	defs, err := c.list(ctx, "/subscriptions/"+e.cred.SubscriptionID+"/providers/Microsoft.Authorization/roleDefinitions", "2022-04-01",
		"roleName eq '"+strings.ReplaceAll(name, "'", "''")+"'")
	if err != nil {
		return "", fmt.Errorf("look up role %q: %w", name, err)
	}
	for _, d := range defs {
		props, _ := d["properties"].(map[string]any)
		if rn, _ := props["roleName"].(string); strings.EqualFold(rn, name) {
			id, _ := d["id"].(string)
			e.r.roles.Store(key, id)
			return id, nil
		}
	}
	return "", fmt.Errorf("%w: no role named %q", errInvalidSpec, name)
}

// referenceID resolves a reference to one of our objects to its ARM id.
func (e *prepareEnv) referenceID(ctx context.Context, group, kind, name string) (string, error) {
	return e.r.readyID(ctx, e.namespace, group, kind, name, errReference, errReference)
}

// exportEnv is what Exports may use.
type exportEnv struct {
	cred       *credentials.Credential
	reader     *armClient
	id         string
	apiVersion string
	keys       map[string]string // listKeys' answer, asked once per pass
}

// listKeys returns a storage account's keys as key1, key2.
func (e *exportEnv) listKeys(ctx context.Context) (map[string]string, error) {
	if e.keys != nil {
		return e.keys, nil
	}
	res, err := e.reader.post(ctx, e.id+"/listKeys", e.apiVersion)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := map[string]string{}
	keys, _ := res["keys"].([]any)
	for _, k := range keys {
		m, _ := k.(map[string]any)
		name, _ := m["keyName"].(string)
		val, _ := m["value"].(string)
		out[name] = val
	}
	e.keys = out
	return out, nil
}
