package armresource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cerulean/cerulean/api/shared"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/patch"
)

// pass is one reconciliation of one object. Its phases change obj only in memory; the patch
// helper writes metadata and status once, at the end (or before the first ARM write, for the
// finalizer).
type pass struct {
	r       *Reconciler
	obj     *unstructured.Unstructured
	ph      *patch.Helper
	orig    map[string]any // status when the pass began
	cred    *credentials.Credential
	id      string
	status  map[string]any // ARM's view, in the status shape
	armSeen bool           // status holds a fresh ARM view
	// armType and apiVersion address the resource in ARM (the kind's, or a generic object's
	// own); targetErr is why they could not be had (an invalid or disallowed type).
	armType, apiVersion string
	targetErr           error
	// hashAhead is set when this pass wrote the applied hash before ARM answered its PUT.
	hashAhead bool
}

func (r *Reconciler) newPass(obj *unstructured.Unstructured) (*pass, error) {
	// Locked: a pass that read a cache behind the controller's own last write gets a Conflict
	// instead of overwriting newer metadata (a list such as finalizers is replaced whole) or
	// status; the next pass reads the newer object.
	ph, err := patch.New(r.Client, obj, patch.WithOptimisticLock(), patch.WithOwnedConditions(shared.ConditionTypeReady))
	if err != nil {
		return nil, err
	}
	orig, _, _ := unstructured.NestedMap(obj.Object, "status")
	p := &pass{r: r, obj: obj, ph: ph, orig: orig}
	p.armType, p.apiVersion, p.targetErr = r.target(obj)
	return p, nil
}

// run is gather → plan → apply. It returns nil when the resource matches its spec (or, with
// the skip policy, was read), a *progressError while an operation runs, else the failure.
func (p *pass) run(ctx context.Context) error {
	g, err := p.gather(ctx)
	if err != nil {
		return err
	}
	reader, err := p.r.newARM(p.cred.Cached())
	if err != nil {
		return err
	}
	if g.policy == PolicySkip {
		return tokenFailure(p.cred, p.observe(ctx, reader))
	}
	return tokenFailure(p.cred, p.apply(ctx, reader, g))
}

// gathered is what the plan is made from.
type gathered struct {
	policy string
	body   map[string]any
	hash   string
	token  string // a resume token the plan may follow (already checked)
	// confirmed: the applied hash may be trusted. A first create writes it before its PUT, so
	// it counts only once status holds ARM's view of this id (or when no pass wrote the
	// resource-id annotation: an import's hash).
	confirmed bool
}

// gather reads everything the pass needs before any Azure call that changes something: the
// credential, the ARM id the spec names, the request body and its exports' expressions.
func (p *pass) gather(ctx context.Context) (gathered, error) {
	g := gathered{policy: p.obj.GetAnnotations()[AnnotationReconcilePolicy]}
	if p.targetErr != nil { // first: a disallowed type reaches nothing, not even a credential
		return g, p.targetErr
	}
	cred, err := p.r.credential(ctx, p.obj)
	if err != nil {
		return g, err
	}
	p.cred = cred
	if p.id, err = p.r.armID(ctx, p.obj, cred, true); err != nil {
		return g, tokenFailure(cred, err)
	}
	// Before any Azure call: the namespace must have been granted the scopes it names.
	if err := p.r.checkGrants(ctx, p.obj, cred, p.id); err != nil {
		return g, err
	}
	p.checkResourceID(ctx)
	if g.policy == PolicySkip {
		return g, nil
	}
	// A bad export expression fails before anything is written to ARM.
	if err := CompileExpressions(p.obj); err != nil {
		return g, err
	}
	if g.body, err = p.r.body(ctx, p.obj, cred); err != nil {
		return g, tokenFailure(cred, err)
	}
	g.hash = bodyHash(g.body)
	ann := p.obj.GetAnnotations()
	statusID, _, _ := unstructured.NestedString(p.obj.Object, "status", "id")
	g.confirmed = ann[AnnotationResourceID] == "" || sameID(statusID, p.id)
	if token := ann[AnnotationPollerToken]; token != "" && ann[AnnotationPollerID] != pollerDelete {
		if err := p.r.checkToken(token, p.id, p.armType); err != nil {
			p.dropToken(ctx, err)
		} else {
			g.token = token
		}
	}
	return g, nil
}

// credential resolves obj's credential, marking its errors for classify.
func (r *Reconciler) credential(ctx context.Context, obj *unstructured.Unstructured) (*credentials.Credential, error) {
	cred, err := r.creds.For(ctx, obj)
	if errors.Is(err, credentials.ErrInvalidCredential) {
		return nil, fmt.Errorf("%w: %w", errInvalidSpec, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCredential, err)
	}
	return cred, nil
}

// checkResourceID reports a resource-id annotation that disagrees with the spec's id: it is
// ignored (overwritten when the pass ends), never followed.
func (p *pass) checkResourceID(ctx context.Context) {
	if ann := p.obj.GetAnnotations()[AnnotationResourceID]; ann != "" && !sameID(ann, p.id) {
		log.FromContext(ctx).Info("Ignoring a resource-id annotation that disagrees with the spec", "annotation", ann, "id", p.id)
		p.r.recorder.Eventf(p.obj, nil, corev1.EventTypeWarning, "ResourceIDIgnored", "Reconcile",
			"The annotation %s names %s, but the spec names %s: the annotation is ignored and replaced", AnnotationResourceID, ann, p.id)
		setAnnotations(p.obj, map[string]string{AnnotationResourceID: p.id})
	}
}

// dropToken forgets a resume token that may not be followed, saying why; the operation's
// state is read from the resource instead.
func (p *pass) dropToken(ctx context.Context, why error) {
	log.FromContext(ctx).Info("Dropping a poller resume token", "reason", why.Error())
	p.r.recorder.Eventf(p.obj, nil, corev1.EventTypeWarning, "ResumeTokenDropped", "Reconcile",
		"The annotation %s was dropped: %v; the operation's state is read from the resource", AnnotationPollerToken, why)
	setAnnotations(p.obj, map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""})
}

// observe is the skip policy: read only.
func (p *pass) observe(ctx context.Context, reader armAPI) error {
	res, err := reader.get(ctx, p.id, p.apiVersion)
	if isNotFound(err) {
		return fmt.Errorf("%w: %s does not exist in Azure and the reconcile policy is skip", errNotInAzure, p.id)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", p.id, err)
	}
	return p.finish(ctx, reader, res)
}

// step is what a pass does to ARM, decided by plan.
type step int

const (
	stepPut    step = iota // send the body
	stepResume             // poll the recorded operation
	stepRead               // the body was applied: read and compare
)

// plan decides the ARM step from the annotations alone: a running operation is resumed, a body
// ARM accepted already is read back, anything else is sent.
func plan(ann map[string]string, g gathered) step {
	switch {
	case g.token != "":
		return stepResume
	case ann[AnnotationAppliedHash] == g.hash && g.confirmed:
		return stepRead
	default:
		return stepPut
	}
}

// apply makes ARM hold the spec: resume a running operation, PUT when the body changed or ARM
// drifted, otherwise one GET.
func (p *pass) apply(ctx context.Context, reader armAPI, g gathered) error {
	switch plan(p.obj.GetAnnotations(), g) {
	case stepResume:
		res, done, err := p.resume(ctx, reader, g.token)
		if !done {
			return err
		}
		if err != nil {
			return fmt.Errorf("create or update %s: %w", p.id, err)
		}
		if p.obj.GetAnnotations()[AnnotationAppliedHash] == g.hash && res != nil {
			return p.finish(ctx, reader, res)
		}
		if p.obj.GetAnnotations()[AnnotationAppliedHash] != g.hash {
			break
		}
		fallthrough
	case stepRead:
		res, err := reader.get(ctx, p.id, p.apiVersion)
		switch {
		case isNotFound(err):
			log.FromContext(ctx).Info("Resource missing in Azure; creating it again", "id", p.id)
		case err != nil:
			return fmt.Errorf("read %s: %w", p.id, err)
		default:
			where := drifted(withoutPaths(g.body, p.r.opts.Kind.DriftIgnore), res)
			if where == "" {
				return p.finish(ctx, reader, res)
			}
			log.FromContext(ctx).Info("Azure resource drifted; updating it", "id", p.id, "field", where)
		}
	}
	res, err := p.put(ctx, g.body, g.hash)
	if err != nil {
		return err
	}
	return p.finish(ctx, reader, res)
}

// put sends the PUT with a fresh credential and waits for a short operation; a long one is
// recorded on the object (resume token) and left running. The finalizer and the id about to be
// written are stored first, so a deletion always knows to clean up.
func (p *pass) put(ctx context.Context, body map[string]any, hash string) (res map[string]any, err error) {
	if check := p.r.opts.Kind.CheckPut; check != nil {
		reader, err := p.r.newARM(p.cred.Cached())
		if err != nil {
			return nil, err
		}
		if err := check(ctx, &putEnv{p: p, client: reader}); err != nil {
			return nil, err
		}
	}
	defer func() {
		var running *progressError
		if err != nil && !errors.As(err, &running) && p.hashAhead {
			setAnnotations(p.obj, map[string]string{AnnotationAppliedHash: ""}) // not accepted
		}
	}()
	if err := p.beforeWrite(ctx, hash); err != nil {
		return nil, err
	}
	fresh, err := p.cred.Fresh(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCredential, err)
	}
	writer, err := p.r.newARM(fresh)
	if err != nil {
		return nil, err
	}
	if p.r.opts.Kind.BeforePut != nil {
		body = deepCopy(body).(map[string]any) // the hash stays the spec's
		if err := p.r.opts.Kind.BeforePut(ctx, &putEnv{p: p, client: writer}, body); err != nil {
			return nil, err
		}
	}
	poller, wait, err := writer.beginPut(ctx, p.id, p.apiVersion, body)
	if err != nil {
		return nil, fmt.Errorf("create or update %s: %w", p.id, err)
	}
	if !poller.Done() {
		token, err := poller.ResumeToken()
		if err != nil {
			return nil, fmt.Errorf("record operation: %w", err)
		}
		setAnnotations(p.obj, map[string]string{AnnotationPollerToken: token, AnnotationPollerID: hash})
		return nil, &progressError{msg: "The resource is being created or updated in Azure", wait: wait}
	}
	raw, err := poller.Result(ctx)
	if err != nil {
		return nil, fmt.Errorf("create or update %s: %w", p.id, err)
	}
	if res, err = decodeResource(raw); err != nil {
		return nil, err
	}
	setAnnotations(p.obj, map[string]string{AnnotationAppliedHash: hash, AnnotationPollerToken: "", AnnotationPollerID: ""})
	return res, nil
}

// beforeWrite stores the finalizer and the resource id before the first write to ARM (one
// patch, only when one is missing), and holds the credential's Secret so that the deletion
// can authenticate however the namespace goes. That patch carries the body's hash too, so a
// first create writes metadata once: the hash counts only once status confirms it (plan), and
// is removed when ARM refuses the PUT.
func (p *pass) beforeWrite(ctx context.Context, hash string) error {
	if err := credentials.Hold(ctx, p.r.Client, p.cred); err != nil {
		return err
	}
	if controllerutil.ContainsFinalizer(p.obj, Finalizer) && p.obj.GetAnnotations()[AnnotationResourceID] == p.id {
		return nil
	}
	controllerutil.AddFinalizer(p.obj, Finalizer)
	setAnnotations(p.obj, map[string]string{AnnotationResourceID: p.id, AnnotationAppliedHash: hash})
	p.hashAhead = true
	return p.ph.Patch(ctx, p.obj)
}

// resume polls a recorded PUT once. done is false while it runs (err is then a progressError).
// When it ended, the token is cleared and, on success, its body hash marked applied.
func (p *pass) resume(ctx context.Context, reader armAPI, token string) (map[string]any, bool, error) {
	clear := map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""}
	poller, err := reader.resume(token)
	if err != nil {
		setAnnotations(p.obj, clear)
		return nil, true, err
	}
	done, wait, err := stepPoller(ctx, poller)
	if !done {
		if err != nil {
			return nil, false, err
		}
		return nil, false, &progressError{msg: "The resource is being created or updated in Azure", wait: wait}
	}
	var res map[string]any
	if err == nil {
		if raw, rerr := poller.Result(ctx); rerr == nil {
			res, _ = decodeResource(raw)
		}
		clear[AnnotationAppliedHash] = p.obj.GetAnnotations()[AnnotationPollerID]
	}
	setAnnotations(p.obj, clear)
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
func (p *pass) finish(ctx context.Context, reader armAPI, res map[string]any) error {
	if res == nil {
		var err error
		if res, err = reader.get(ctx, p.id, p.apiVersion); err != nil {
			return fmt.Errorf("read %s: %w", p.id, err)
		}
	}
	p.status = statusFromARM(res, p.r.opts.Kind.Flatten)
	scrubSecretInputs(p.status, p.r.opts.Kind.SecretInputs)
	p.armSeen = true
	setAnnotations(p.obj, map[string]string{AnnotationResourceID: p.id})
	return p.r.export(ctx, p.obj, p.status, &exportEnv{obj: p.obj, reader: reader, id: p.id, apiVersion: p.apiVersion, cred: p.cred})
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
	if len(a) == 0 {
		a = nil
	}
	o.SetAnnotations(a)
}
