// Package armresource is the generic ARM-resource reconciler: one controller per kind, driven
// by a small per-kind adapter (Kind) that says where the resource lives in ARM, how its spec
// becomes a request body and what it exports. It writes to ARM only when needed (a changed
// spec, or drift a GET shows), resumes long-running operations across restarts from the
// object's annotations, requests a fresh token for every PUT and DELETE, and deletes in Azure
// only when the Kubernetes object is deleted and its policy allows it.
//
// A pass runs in phases (pass.go): gather (credential, ARM id, body), plan (pure: PUT, resume,
// read or nothing) and apply; status and metadata are written once at the end through the
// shared patch helper (status.go); errors go back to controller-runtime, whose rate limiter
// backs off (errors.go). Nothing an annotation says is trusted beyond what the spec allows:
// the ARM id is always computed from the spec (owners.go) and a resume token is followed only
// to ARM's own operation URLs (tokens.go).
package armresource

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
	"github.com/cerulean/cerulean/internal/controller/record"
)

// Annotations and the finalizer, Azure Service Operator's names (so objects move between the
// two managers unchanged), and the one of Cerulean's own.
const (
	AnnotationReconcilePolicy = "serviceoperator.azure.com/reconcile-policy"
	AnnotationResourceID      = "serviceoperator.azure.com/resource-id"
	AnnotationPollerToken     = "serviceoperator.azure.com/poller-resume-token"
	AnnotationPollerID        = "serviceoperator.azure.com/poller-resume-id"
	// AnnotationAppliedHash identifies the last request body ARM accepted: a spec whose body
	// hashes the same needs no PUT. A first create writes it with the finalizer, before its PUT
	// (one metadata write fewer); it counts once status holds ARM's view of the same id.
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
	// RateLimiter backs off failing objects (default: per object, 1s doubling to 5m).
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// Now is the clock (default time.Now).
	Now func() time.Time
	// AllowUngrantedScopes turns off the NamespaceGrant check of resources reconciled with the
	// global credential (Azure Service Operator's behaviour: that credential is trusted
	// cluster-wide).
	AllowUngrantedScopes bool
	// GenericResourceTypes are the ARM types the generic kind (AzureResource) may reconcile
	// (TypeAllowed); empty refuses every one. Other kinds ignore it.
	GenericResourceTypes []string
}

// credentialResolver finds an object's Azure credential.
type credentialResolver interface {
	For(ctx context.Context, obj client.Object) (*credentials.Credential, error)
}

// kubeExports writes exports to ConfigMaps and Secrets; vaultExports to a Key Vault secret.
type (
	kubeExports interface {
		Write(ctx context.Context, owner client.Object, vals []exports.Value) error
	}
	vaultExports interface {
		Write(ctx context.Context, cred azcore.TokenCredential, vaultURL, secretName string, vals map[string]string) error
	}
)

// Reconciler reconciles one kind.
type Reconciler struct {
	client.Client
	opts     Options
	creds    credentialResolver
	newARM   func(azcore.TokenCredential) (armAPI, error)
	kube     kubeExports
	vault    vaultExports
	recorder *record.Recorder
	roles    roleCache
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
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 5*time.Minute)
	}
	r := &Reconciler{Client: c, opts: opts, recorder: record.New(opts.Recorder),
		newARM: func(cred azcore.TokenCredential) (armAPI, error) { return newARMClient(cred, opts.ARM) }}
	if opts.Credentials != nil {
		r.creds = opts.Credentials
	}
	if opts.Exports != nil {
		r.kube = opts.Exports
	}
	if opts.KeyVault != nil {
		r.vault = opts.KeyVault
	}
	return r
}

func (r *Reconciler) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.opts.Kind.GVK)
	return u
}

// Reconcile brings one object's Azure resource to its spec: a pass in phases, then one write
// of what changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("kind", r.opts.Kind.GVK.Kind))
	p, err := r.newPass(obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return p.delete(ctx)
	}
	err = p.run(ctx)
	o := classify(err, r.opts.SyncPeriod, r.pollAfter)
	p.noteUnexported(&o)
	return p.finishPass(ctx, o, err)
}
