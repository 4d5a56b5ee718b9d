// Package controlplaneidentities is the controller of ControlPlaneIdentities (cerulean.dev): for
// each component of a hosted control plane it obtains the credentials of the component's managed
// identity from the managed-identity data plane (a client certificate registered on the
// identity's principal), stores them as the credentials JSON in one Key Vault secret, renews them
// at renew_after, and keeps one SecretProviderClass that mounts that secret with exactly the
// reference's parameters.
package controlplaneidentities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	keyvaultv1 "github.com/cerulean/cerulean/api/keyvault/v1api20230701"
	managedidentityv1 "github.com/cerulean/cerulean/api/managedidentity/v1api20230131"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/patch"
	"github.com/cerulean/cerulean/internal/controller/record"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// Finalizer keeps an object until what it created is removed.
const Finalizer = "cerulean.dev/control-plane-identities"

// Event reasons besides the condition reasons.
const (
	EventCredentialsIssued = "CredentialsIssued"
	EventSPCCreated        = "SecretProviderClassCreated"
	EventSPCReverted       = "SecretProviderClassReverted"
	EventSecretDeleted     = "SecretDeleted"
)

// SPCGroupKind is the Secrets Store CSI Driver's SecretProviderClass.
var SPCGroupKind = schema.GroupKind{Group: "secrets-store.csi.x-k8s.io", Kind: "SecretProviderClass"}

// Options configure the controller.
type Options struct {
	Azure       Azure
	Credentials *credentials.Resolver
	Recorder    events.EventRecorder
	// APIReader reads without the cache (the CRD's state on delete); nil reads through the
	// manager's client.
	APIReader client.Reader
	// Clock is the time renewals are decided by (default time.Now).
	Clock func() time.Time
	// Resync bounds the time between two looks at an object (default 5m): the SecretProviderClass
	// and the Key Vault secret are checked then too.
	Resync time.Duration
}

// Reconciler reconciles ControlPlaneIdentities.
type Reconciler struct {
	c    client.Client
	opts Options

	// pending holds credentials issued but not yet stored (Key Vault refused or failed), by
	// object UID and identity id, so that a retry stores them instead of minting another
	// certificate per attempt. In memory only; dropped once stored or unusable.
	mu      sync.Mutex
	pending map[string]hcpcredentials.File
}

// +kubebuilder:rbac:groups=cerulean.dev,resources=controlplaneidentities,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cerulean.dev,resources=controlplaneidentities/status;controlplaneidentities/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=secrets-store.csi.x-k8s.io,resources=secretproviderclasses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the controller with mgr. It watches SecretProviderClasses (so a hand edit is
// reverted at once) when the Secrets Store CSI Driver's CRD is installed at start; without it,
// each component reports the missing CRD and the resync looks again.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Resync <= 0 {
		opts.Resync = 5 * time.Minute
	}
	if opts.Azure == nil || opts.Credentials == nil || opts.Recorder == nil {
		return errors.New("set up control-plane identities controller: Azure, Credentials and Recorder are required")
	}
	if opts.APIReader == nil {
		opts.APIReader = mgr.GetAPIReader()
	}
	opts.Recorder = record.New(opts.Recorder)
	r := &Reconciler{c: mgr.GetClient(), opts: opts, pending: map[string]hcpcredentials.File{}}
	inNamespace := handler.EnqueueRequestsFromMapFunc(r.inNamespace)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("controlplaneidentities").
		For(&cpv1.ControlPlaneIdentities{}).
		Watches(&managedidentityv1.UserAssignedIdentity{}, inNamespace).
		Watches(&keyvaultv1.Vault{}, inNamespace)
	if _, err := mgr.GetRESTMapper().RESTMapping(SPCGroupKind, "v1"); err == nil {
		b = b.Owns(&secretsstorev1.SecretProviderClass{})
	} else {
		log.FromContext(ctx).Info("SecretProviderClass CRD not installed: not watching SecretProviderClasses", "err", err.Error())
	}
	return b.Complete(r)
}

// inNamespace enqueues every ControlPlaneIdentities of an identity's or vault's namespace, so a
// reference that becomes Ready is seen at once.
func (r *Reconciler) inNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list cpv1.ControlPlaneIdentitiesList
	if err := r.c.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, x := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: x.Namespace, Name: x.Name}})
	}
	return out
}

// condError is a failure with the condition reason it shows as.
type condError struct {
	reason string
	msg    string
	err    error
}

func (e *condError) Error() string { return e.msg }
func (e *condError) Unwrap() error { return e.err }

func failure(reason, msg string, err error) error {
	return &condError{reason: reason, msg: msg, err: err}
}

// Reconcile brings one object's components to their desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	obj := &cpv1.ControlPlaneIdentities{}
	if err := r.c.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, obj)
	}
	// Ready is this controller's; any other condition on the object is someone else's and kept.
	ph, err := patch.New(r.c, obj, patch.WithOwnedConditions(cpv1.ConditionReady))
	if err != nil {
		return ctrl.Result{}, err
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		// Stored before anything is written to Key Vault, so a deletion always cleans up.
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := ph.Patch(ctx, obj); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	orig := obj.DeepCopy()
	defer func() {
		if err := ph.Patch(ctx, obj); err != nil && retErr == nil {
			retErr = client.IgnoreNotFound(err)
		}
	}()

	now := r.opts.Clock()
	prev := map[cpv1.ComponentName]*cpv1.ComponentStatus{}
	for i := range orig.Status.Components {
		prev[orig.Status.Components[i].Name] = &orig.Status.Components[i]
	}
	shared, sharedErr := r.shared(ctx, obj)
	comps := make([]cpv1.ComponentStatus, 0, len(obj.Spec.Components))
	var firstErr error
	for _, comp := range obj.Spec.Components {
		st := cpv1.ComponentStatus{Name: comp.Name}
		if p := prev[comp.Name]; p != nil {
			st = *p.DeepCopy()
		}
		err := sharedErr
		if err == nil {
			err = r.component(ctx, obj, shared, comp, &st, now)
		}
		r.setReady(obj, &st, err)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		comps = append(comps, st)
	}
	// Components dropped from the spec: what was created for them goes, as on delete.
	var dropped []cpv1.ComponentName
	for name := range prev {
		if !specHas(obj, name) {
			dropped = append(dropped, name)
		}
	}
	sort.Slice(dropped, func(i, j int) bool { return dropped[i] < dropped[j] })
	for _, name := range dropped {
		p := prev[name]
		if shared.cred == nil {
			comps = append(comps, *p) // removed once the credential resolves
			continue
		}
		if err := r.removeComponent(ctx, obj, shared.cred, p); err != nil {
			comps = append(comps, *p)
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	obj.Status.Components = comps
	status, reason, msg := overall(comps)
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: cpv1.ConditionReady, Status: status, Reason: reason,
		Message: truncate(msg), ObservedGeneration: obj.Generation})
	if firstErr != nil {
		var ce *condError
		if errors.As(firstErr, &ce) && terminal(ce.reason) {
			// A configuration or permission problem: look again at the resync, not in a hot loop.
			return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
		}
		return ctrl.Result{}, firstErr
	}
	obj.Status.ObservedGeneration = obj.Generation
	return ctrl.Result{RequeueAfter: requeueAfter(comps, now, r.opts.Resync)}, nil
}

// terminal reasons wait for a change (of the spec, a reference, a role) rather than retrying hot.
func terminal(reason string) bool {
	switch reason {
	case cpv1.ReasonReferenceNotFound, cpv1.ReasonWaitingForOwner, cpv1.ReasonAzureResourceNotFound,
		cpv1.ReasonCredentialsForbidden, cpv1.ReasonKeyVaultForbidden, cpv1.ReasonCredentialsUnusable:
		return true
	}
	return false
}

func specHas(obj *cpv1.ControlPlaneIdentities, name cpv1.ComponentName) bool {
	for _, c := range obj.Spec.Components {
		if c.Name == name {
			return true
		}
	}
	return false
}

// sharedState is what every component of an object uses: its credential, vault and reader.
type sharedState struct {
	cred     *credentials.Credential
	vault    Vault
	readerID string // the reader's client id
}

func (r *Reconciler) shared(ctx context.Context, obj *cpv1.ControlPlaneIdentities) (sharedState, error) {
	cred, err := r.opts.Credentials.For(ctx, obj)
	if err != nil {
		return sharedState{}, failure(cpv1.ReasonFailed, "resolve the Azure credential: "+err.Error(), err)
	}
	s := sharedState{cred: cred}
	vaultID, err := r.refID(ctx, obj.Namespace, obj.Spec.KeyVault, &keyvaultv1.Vault{}, "keyVault")
	if err != nil {
		return s, err
	}
	if s.vault, err = r.opts.Azure.Vault(ctx, cred.Cached(), vaultID); err != nil {
		return s, azureFailure("read the vault "+vaultID, err)
	}
	if s.vault.URI == "" {
		return s, failure(cpv1.ReasonFailed, "the vault "+vaultID+" has no vaultUri", nil)
	}
	if s.vault.TenantID == "" {
		s.vault.TenantID = cred.TenantID
	}
	rd := obj.Spec.VaultReader
	switch {
	case rd.ClientID != "":
		s.readerID = rd.ClientID
	default:
		id, err := r.refID(ctx, obj.Namespace, cpv1.ResourceReference{Name: rd.Name, ARMID: rd.ARMID}, &managedidentityv1.UserAssignedIdentity{}, "vaultReader")
		if err != nil {
			return s, err
		}
		mi, err := r.opts.Azure.Identity(ctx, cred.Cached(), id)
		if err != nil {
			return s, azureFailure("read the vault reader identity "+id, err)
		}
		s.readerID = mi.ClientID
	}
	return s, nil
}

// refID resolves a reference to an ARM id: the armId, or the status.id of the ASO object.
func (r *Reconciler) refID(ctx context.Context, ns string, ref cpv1.ResourceReference, into client.Object, field string) (string, error) {
	if ref.ARMID != "" {
		return ref.ARMID, nil
	}
	kind := "UserAssignedIdentity"
	if _, ok := into.(*keyvaultv1.Vault); ok {
		kind = "Vault"
	}
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, into); err != nil {
		if apierrors.IsNotFound(err) {
			return "", failure(cpv1.ReasonReferenceNotFound, fmt.Sprintf("%s: %s %s/%s does not exist", field, kind, ns, ref.Name), err)
		}
		return "", failure(cpv1.ReasonFailed, fmt.Sprintf("%s: read %s %s/%s: %v", field, kind, ns, ref.Name, err), err)
	}
	var id string
	switch o := into.(type) {
	case *keyvaultv1.Vault:
		id = o.Status.ID
	case *managedidentityv1.UserAssignedIdentity:
		id = o.Status.ID
	}
	if id == "" {
		return "", failure(cpv1.ReasonWaitingForOwner, fmt.Sprintf("%s: %s %s/%s has no Azure id yet (not Ready)", field, kind, ns, ref.Name), nil)
	}
	return id, nil
}

// azureFailure classifies an Azure error: 404 is AzureResourceNotFound; the message names the
// operation, the status and Azure's error code, never a body that could hold a value.
func azureFailure(what string, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%s: %d %s", what, re.StatusCode, http.StatusText(re.StatusCode))
		if re.ErrorCode != "" {
			msg += " (" + re.ErrorCode + ")"
		}
		if re.StatusCode == http.StatusNotFound {
			return failure(cpv1.ReasonAzureResourceNotFound, msg, err)
		}
		return failure(cpv1.ReasonFailed, msg, err)
	}
	return failure(cpv1.ReasonFailed, what+": "+err.Error(), err)
}

// component brings one component to its desired state: current credentials in Key Vault, and
// its SecretProviderClass.
func (r *Reconciler) component(ctx context.Context, obj *cpv1.ControlPlaneIdentities, s sharedState, comp cpv1.Component, st *cpv1.ComponentStatus, now time.Time) error {
	identityID, err := r.refID(ctx, obj.Namespace, comp.Identity, &managedidentityv1.UserAssignedIdentity{}, "identity")
	if err != nil {
		return err
	}
	mi, err := r.opts.Azure.Identity(ctx, s.cred.Cached(), identityID)
	if err != nil {
		return azureFailure("read the identity "+identityID, err)
	}
	secretName := comp.SecretName
	if secretName == "" {
		secretName = string(comp.Name)
	}
	version, value, err := r.opts.Azure.CurrentSecret(ctx, s.cred.Cached(), s.vault.URI, secretName)
	if err != nil {
		return keyVaultFailure("read", secretName, s.vault, err)
	}
	cur := stored(value)
	if why := renewal(cur, mi.ClientID, now); why != "" {
		if err := r.issue(ctx, obj, s, comp.Name, mi, secretName, why, st, now); err != nil {
			return err
		}
	} else {
		st.IdentityID, st.ClientID, st.VaultURI, st.SecretName, st.SecretVersion = mi.ID, cur.ClientID, s.vault.URI, secretName, version
		times(st, *cur)
	}
	st.SecretProviderClass = string(comp.Name)
	return r.syncSPC(ctx, obj, comp.Name, desiredSPCSpec(secretName, s.vault.Name, s.vault.TenantID, s.readerID))
}

// issue gets new credentials and stores them, all or nothing: the status changes only once
// Key Vault holds them.
func (r *Reconciler) issue(ctx context.Context, obj *cpv1.ControlPlaneIdentities, s sharedState, name cpv1.ComponentName, mi Identity,
	secretName, why string, st *cpv1.ComponentStatus, now time.Time) error {
	if err := credentials.Hold(ctx, r.c, s.cred); err != nil {
		return failure(cpv1.ReasonFailed, err.Error(), err)
	}
	fresh, err := s.cred.Fresh(ctx)
	if err != nil {
		return failure(cpv1.ReasonFailed, "build the Azure credential: "+err.Error(), err)
	}
	key := string(obj.UID) + "/" + strings.ToLower(mi.ID)
	f, ok := r.takePending(key, now)
	if !ok {
		f, err = r.opts.Azure.IssueCredentials(ctx, fresh, mi.ID)
	}
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
			return failure(cpv1.ReasonCredentialsForbidden, fmt.Sprintf(
				"the managed-identity data plane refused the credentials of %s: 403 Forbidden (%s); the manager's principal needs Managed Identity Operator (or another role with %s) on the identity",
				mi.ID, re.ErrorCode, "userAssignedIdentities/assign/action"), err)
		}
		return azureFailure("get the credentials of "+mi.ID, err)
	}
	if err := usable(f, now); err != nil {
		return failure(cpv1.ReasonCredentialsUnusable, fmt.Sprintf("not storing the credentials of %s: %v", mi.ID, err), err)
	}
	value, err := marshal(f)
	if err != nil {
		return failure(cpv1.ReasonFailed, err.Error(), err)
	}
	version, err := r.opts.Azure.SetSecret(ctx, fresh, s.vault.URI, secretName, value)
	if err != nil {
		r.putPending(key, f)
		return keyVaultFailure("write", secretName, s.vault, err)
	}
	st.IdentityID, st.ClientID, st.VaultURI, st.SecretName, st.SecretVersion = mi.ID, f.ClientID, s.vault.URI, secretName, version
	times(st, f)
	log.FromContext(ctx).Info("Stored new credentials", "component", name, "identity", mi.ID, "secret", secretName, "version", version, "why", why)
	r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventCredentialsIssued, "IssueCredentials",
		"%s: credentials of %s stored as version %s of secret %s in vault %s (%s; renew after %s)",
		name, mi.ID, version, secretName, s.vault.Name, why, f.RenewAfter.UTC().Format(time.RFC3339))
	return nil
}

// takePending returns (and forgets) credentials issued earlier for key and not yet stored, when
// they are still good to store and not yet due for renewal.
func (r *Reconciler) takePending(key string, now time.Time) (hcpcredentials.File, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.pending[key]
	delete(r.pending, key)
	if !ok || usable(f, now) != nil || !now.Before(f.RenewAfter) {
		return hcpcredentials.File{}, false
	}
	return f, true
}

func (r *Reconciler) putPending(key string, f hcpcredentials.File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[key] = f
}

// forgetPending drops what an object left pending (on delete).
func (r *Reconciler) forgetPending(uid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.pending {
		if strings.HasPrefix(k, uid+"/") {
			delete(r.pending, k)
		}
	}
}

// keyVaultFailure names the vault, the secret and Key Vault's answer; a 403 says which role is
// missing.
func keyVaultFailure(op, secretName string, v Vault, err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusForbidden {
		role := "Key Vault Secrets Officer"
		if op == "read" {
			role = "Key Vault Secrets Officer (or Secrets User to read)"
		}
		return failure(cpv1.ReasonKeyVaultForbidden, fmt.Sprintf(
			"Key Vault refused to %s secret %s in vault %s: 403 Forbidden (%s); the manager's principal needs %s on the vault",
			op, secretName, v.Name, re.ErrorCode, role), err)
	}
	return azureFailure(fmt.Sprintf("%s secret %s in vault %s", op, secretName, v.Name), err)
}

// syncSPC creates the component's SecretProviderClass or reverts it to the desired spec.
func (r *Reconciler) syncSPC(ctx context.Context, obj *cpv1.ControlPlaneIdentities, name cpv1.ComponentName, spec secretsstorev1.SecretProviderClassSpec) error {
	spc := &secretsstorev1.SecretProviderClass{}
	err := r.c.Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: string(name)}, spc)
	switch {
	case meta.IsNoMatchError(err):
		return failure(cpv1.ReasonSecretProviderClassFailed,
			"the Secrets Store CSI Driver's CRD secretproviderclasses.secrets-store.csi.x-k8s.io is not installed", err)
	case apierrors.IsNotFound(err):
		spc = &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: string(name),
			Labels: map[string]string{LabelManagedBy: managedBy, LabelComponent: string(name)}}, Spec: spec}
		if err := controllerutil.SetControllerReference(obj, spc, r.c.Scheme()); err != nil {
			return failure(cpv1.ReasonSecretProviderClassFailed, "own SecretProviderClass: "+err.Error(), err)
		}
		if err := r.c.Create(ctx, spc); err != nil {
			return failure(cpv1.ReasonSecretProviderClassFailed, fmt.Sprintf("create SecretProviderClass %s: %v", name, err), err)
		}
		r.opts.Recorder.Eventf(obj, spc, corev1.EventTypeNormal, EventSPCCreated, "SyncSecretProviderClass", "%s: SecretProviderClass %s created", name, name)
		return nil
	case err != nil:
		return failure(cpv1.ReasonSecretProviderClassFailed, fmt.Sprintf("read SecretProviderClass %s: %v", name, err), err)
	}
	if !metav1.IsControlledBy(spc, obj) {
		return failure(cpv1.ReasonSecretProviderClassFailed, fmt.Sprintf("SecretProviderClass %s exists and is not owned by this object; not overwriting it", name), nil)
	}
	if equality.Semantic.DeepEqual(spc.Spec, spec) && spc.Labels[LabelManagedBy] == managedBy && spc.Labels[LabelComponent] == string(name) {
		return nil
	}
	spc.Spec = spec
	if spc.Labels == nil {
		spc.Labels = map[string]string{}
	}
	spc.Labels[LabelManagedBy], spc.Labels[LabelComponent] = managedBy, string(name)
	if err := r.c.Update(ctx, spc); err != nil {
		return failure(cpv1.ReasonSecretProviderClassFailed, fmt.Sprintf("update SecretProviderClass %s: %v", name, err), err)
	}
	r.opts.Recorder.Eventf(obj, spc, corev1.EventTypeNormal, EventSPCReverted, "SyncSecretProviderClass",
		"%s: SecretProviderClass %s differed from the desired one and was reverted", name, name)
	return nil
}

// setReady sets a component's Ready condition and records a Warning event when it turns to a
// new failure.
func (r *Reconciler) setReady(obj *cpv1.ControlPlaneIdentities, st *cpv1.ComponentStatus, err error) {
	cond := metav1.Condition{Type: cpv1.ConditionReady, Status: metav1.ConditionTrue, Reason: cpv1.ReasonSucceeded,
		Message: "credentials current in Key Vault; SecretProviderClass in sync", ObservedGeneration: obj.Generation}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, cpv1.ReasonFailed, err.Error()
		var ce *condError
		if errors.As(err, &ce) {
			cond.Reason = ce.reason
		}
		cond.Message = truncate(cond.Message)
		if old := meta.FindStatusCondition(st.Conditions, cpv1.ConditionReady); old == nil || old.Reason != cond.Reason || old.Message != cond.Message {
			r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, cond.Reason, "Reconcile", "%s: %s", st.Name, cond.Message)
		}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}

func truncate(s string) string {
	const limit = 4096
	if len(s) > limit {
		return s[:limit-3] + "..."
	}
	return s
}
