// Package manager runs Cerulean's controllers: the ARM-resource reconcilers of every kind,
// with leader election, metrics and health probes, against one kube-apiserver and one Azure.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"

	aadpodidentityv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	authorizationv1api20220401 "github.com/cerulean/cerulean/api/authorization/v1api20220401"
	authorizationv20220401 "github.com/cerulean/cerulean/api/authorization/v20220401"
	cachev1api20230801 "github.com/cerulean/cerulean/api/cache/v1api20230801"
	cachev1api20241101 "github.com/cerulean/cerulean/api/cache/v1api20241101"
	ceruleanv1alpha1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	containerservicev1api20240901 "github.com/cerulean/cerulean/api/containerservice/v1api20240901"
	containerservicev20240901 "github.com/cerulean/cerulean/api/containerservice/v20240901"
	dbforpostgresqlv1 "github.com/cerulean/cerulean/api/dbforpostgresql/v1"
	dbforpostgresqlv1api20240801 "github.com/cerulean/cerulean/api/dbforpostgresql/v1api20240801"
	dbforpostgresqlv1api20250801 "github.com/cerulean/cerulean/api/dbforpostgresql/v1api20250801"
	keyvaultv1api20230701 "github.com/cerulean/cerulean/api/keyvault/v1api20230701"
	managedidentityv1api20230131 "github.com/cerulean/cerulean/api/managedidentity/v1api20230131"
	resourcesv1api20200601 "github.com/cerulean/cerulean/api/resources/v1api20200601"
	storagev1api20230101 "github.com/cerulean/cerulean/api/storage/v1api20230101"
	storagev20230101 "github.com/cerulean/cerulean/api/storage/v20230101"
	storagev20250601 "github.com/cerulean/cerulean/api/storage/v20250601"
	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/azure/armmetrics"
	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/controller/controlplaneidentities"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
	"github.com/cerulean/cerulean/internal/controller/pguser"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
)

// Options configure Run.
type Options struct {
	// REST reaches the kube-apiserver; with no QPS set, the manager's requests are limited to
	// DefaultKubeQPS and DefaultKubeBurst.
	REST *rest.Config
	// Azure is the global credential and the cloud's endpoints (the usual AZURE_* variables).
	Azure azure.Config
	// SyncPeriod is how often a Ready resource is read back from ARM (AZURE_SYNC_PERIOD; default 1h).
	SyncPeriod time.Duration
	// PollInterval is the longest wait between polls of a running ARM operation (default
	// 10s); ARM's Retry-After makes it shorter.
	PollInterval time.Duration
	// TargetNamespaces limits the watched namespaces (AZURE_TARGET_NAMESPACES); empty means all.
	TargetNamespaces []string
	// MetricsAddr and HealthAddr serve metrics and the probes; "0" turns one off.
	MetricsAddr string
	HealthAddr  string
	// Profiling adds Go's profiles (net/http/pprof: CPU, heap, goroutines; no memory contents,
	// no command line) under /debug/pprof/ on the metrics endpoint.
	Profiling bool
	// LeaderElection makes only one replica reconcile, through a Lease in LeaderElectionNamespace.
	LeaderElection          bool
	LeaderElectionNamespace string
	// Logger is the root logger.
	Logger logr.Logger
	// ExportKeyVault is the manager-wide Key Vault for secret exports (CERULEAN_EXPORT_KEY_VAULT).
	ExportKeyVault string
	// TokenSource is the manager's service-account token for workload-identity credentials; nil
	// means AZURE_FEDERATED_TOKEN_FILE.
	TokenSource func(context.Context) (string, error)
	// ARMRetry overrides the ARM clients' retry policy (default: two retries honouring
	// Retry-After, then the reconciler's own backoff).
	ARMRetry *policy.RetryOptions
	// SkipNameValidation lets several managers run in one process (tests restarting one).
	SkipNameValidation bool
	// Webhooks, when set, serves the admission webhooks (workload identity) with certificates of
	// the manager's own; their tenant and authority host default to Azure's. Nil serves none.
	Webhooks *webhooks.Options
	// GlobalCredential, when set, is the manager's own credential instead of the one in Azure
	// (workload identity: USE_WORKLOAD_IDENTITY_AUTH, read by FromEnv).
	GlobalCredential *credentials.Source
	// IdentityURL is the managed-identity data plane's URL (CERULEAN_IDENTITY_URL), where
	// ControlPlaneIdentities get their identities' credentials; default: the local cloud's,
	// derived from its ARM endpoint.
	IdentityURL string
	// Clock decides credential renewals (default time.Now).
	Clock func() time.Time
	// ControlPlaneResync bounds the time between two looks at a ControlPlaneIdentities
	// (default 5m).
	ControlPlaneResync time.Duration
	// PodIdentity is the pod-identity assignment controller's mode: "standard" (default;
	// identities are put on nodes' VMs and scale sets through ARM), "managed" (no ARM writes)
	// or "off".
	PodIdentity string
	// AllowUngrantedIdentities lets any namespace use any identity in pod identity
	// (aad-pod-identity's behaviour); by default an AzureIdentity works only in namespaces a
	// NamespaceGrant gives it to.
	AllowUngrantedIdentities bool
	// AllowUngrantedScopes trusts the global credential cluster-wide (Azure Service Operator's
	// behaviour); by default a resource reconciled with it stays inside the ARM scopes a
	// NamespaceGrant gives its namespace.
	AllowUngrantedScopes bool
	// GenericResourceTypes are the ARM types the generic kind (AzureResource) may reconcile:
	// types, or prefixes ending in "/*", matched case-insensitively. Empty (the default)
	// refuses every type.
	GenericResourceTypes []string
	// RateLimiter, when set, backs off failing ARM resources instead of the default (per
	// object, 1s doubling to 5m); tests observe it.
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// PostgreSQLDial connects the User controller to servers (nil: resolve their Azure names).
	PostgreSQLDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// LeaderElectionID names the Lease replicas compete for.
const LeaderElectionID = "cerulean-manager.cerulean.dev"

// Scheme is the scheme of every type the manager reads.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		resourcesv1api20200601.AddToScheme, managedidentityv1api20230131.AddToScheme, keyvaultv1api20230701.AddToScheme,
		authorizationv1api20220401.AddToScheme, authorizationv20220401.AddToScheme,
		storagev20250601.AddToScheme, storagev1api20230101.AddToScheme, storagev20230101.AddToScheme,
		containerservicev1api20240901.AddToScheme, containerservicev20240901.AddToScheme,
		dbforpostgresqlv1api20250801.AddToScheme, dbforpostgresqlv1api20240801.AddToScheme, dbforpostgresqlv1.AddToScheme,
		cachev1api20241101.AddToScheme, cachev1api20230801.AddToScheme,
		aadpodidentityv1.AddToScheme, ceruleanv1alpha1.AddToScheme, secretsstorev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// ParseNamespaces splits AZURE_TARGET_NAMESPACES (comma-separated).
func ParseNamespaces(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// The manager's client-side limits on requests to kube-apiserver when none are set: client-go's
// own (5 a second, bursts of 10) and controller-runtime's (20 and 30) paced a first sync of
// thousands of objects, a few writes each; kube-apiserver's priority and fairness still applies.
const (
	DefaultKubeQPS   = 100
	DefaultKubeBurst = 200
)

// WithDefaultLimits is rc with DefaultKubeQPS and DefaultKubeBurst when it sets no QPS.
func WithDefaultLimits(rc *rest.Config) *rest.Config {
	if rc.QPS != 0 {
		return rc
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = DefaultKubeQPS, DefaultKubeBurst
	return rc
}

// profilingHandlers are net/http/pprof's handlers, when on.
func profilingHandlers(on bool) map[string]http.Handler {
	if !on {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// Run runs the manager until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.REST == nil {
		return errors.New("run manager: no kube-apiserver configuration")
	}
	opts.REST = WithDefaultLimits(opts.REST)
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	ctrl.SetLogger(opts.Logger)
	klog.SetLogger(opts.Logger) // client-go's leader election and informers log through klog
	cacheOpts := cacheOptions(opts.TargetNamespaces)
	metricsAddr := opts.MetricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	healthAddr := opts.HealthAddr
	if healthAddr == "" {
		healthAddr = "0"
	}
	var hooks *webhooks.Webhooks
	var hookServer webhook.Server
	if opts.Webhooks != nil {
		wo := *opts.Webhooks
		if wo.WorkloadIdentity.TenantID == "" {
			wo.WorkloadIdentity.TenantID = opts.Azure.TenantID
		}
		if wo.WorkloadIdentity.AuthorityHost == "" {
			wo.WorkloadIdentity.AuthorityHost = opts.Azure.AuthorityHost
		}
		if opts.PodIdentity == "off" {
			wo.NoPodIdentity = true
		}
		wo.AllowUngrantedIdentities, wo.AllowUngrantedScopes = opts.AllowUngrantedIdentities, opts.AllowUngrantedScopes
		if hooks, err = webhooks.New(opts.REST, wo); err != nil {
			return err
		}
		hookServer = hooks.Server()
	}
	mgr, err := ctrl.NewManager(opts.REST, ctrl.Options{
		WebhookServer:                 hookServer,
		Scheme:                        scheme,
		Logger:                        opts.Logger,
		Cache:                         cacheOpts,
		Client:                        client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		NewClient:                     newClient,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr, ExtraHandlers: profilingHandlers(opts.Profiling)},
		HealthProbeBindAddress:        healthAddr,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    ctrlconfig.Controller{SkipNameValidation: &opts.SkipNameValidation},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	armOpts, err := opts.Azure.ARMOptions()
	if err != nil {
		return fmt.Errorf("configure ARM clients: %w", err)
	}
	if opts.ARMRetry != nil {
		armOpts.Retry = *opts.ARMRetry
	} else {
		armOpts.Retry = policy.RetryOptions{MaxRetries: 2}
	}
	kvOpts, err := opts.Azure.SecretsOptions()
	if err != nil {
		return fmt.Errorf("configure Key Vault clients: %w", err)
	}
	if err := Setup(ctx, mgr, SetupOptions{Azure: opts.Azure, ARM: armOpts, KeyVault: kvOpts, ExportKeyVault: opts.ExportKeyVault,
		SyncPeriod: opts.SyncPeriod, PollInterval: opts.PollInterval, TokenSource: opts.TokenSource, PodIdentity: opts.PodIdentity,
		IdentityURL: opts.IdentityURL, Clock: opts.Clock, ControlPlaneResync: opts.ControlPlaneResync,
		GlobalCredential: opts.GlobalCredential, RateLimiter: opts.RateLimiter, PostgreSQLDial: opts.PostgreSQLDial,
		AllowUngrantedIdentities: opts.AllowUngrantedIdentities, AllowUngrantedScopes: opts.AllowUngrantedScopes,
		GenericResourceTypes: opts.GenericResourceTypes}); err != nil {
		return err
	}
	if hooks != nil {
		if err := hooks.Setup(ctx, mgr); err != nil {
			return fmt.Errorf("set up webhooks: %w", err)
		}
	}
	opts.Logger.Info("Starting manager", "syncPeriod", opts.SyncPeriod.String(), "namespaces", opts.TargetNamespaces, "leaderElection", opts.LeaderElection)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// SetupOptions configure Setup.
type SetupOptions struct {
	Azure          azure.Config
	ARM            *arm.ClientOptions
	KeyVault       *azsecrets.ClientOptions
	ExportKeyVault string
	SyncPeriod     time.Duration
	PollInterval   time.Duration
	// TokenSource is the manager's service-account token for workload-identity credentials
	// (under `cerulean-local up`, from the TokenRequest API); nil means AZURE_FEDERATED_TOKEN_FILE.
	TokenSource func(context.Context) (string, error)
	// PodIdentity is the assignment controller's mode (Options.PodIdentity).
	PodIdentity string
	// GlobalCredential replaces the global credential of Azure (Options.GlobalCredential).
	GlobalCredential *credentials.Source
	// IdentityURL, Clock and ControlPlaneResync configure the ControlPlaneIdentities controller
	// (Options).
	IdentityURL        string
	Clock              func() time.Time
	ControlPlaneResync time.Duration
	// AllowUngrantedIdentities and AllowUngrantedScopes turn the NamespaceGrant checks off
	// (Options).
	AllowUngrantedIdentities, AllowUngrantedScopes bool
	// GenericResourceTypes is the generic kind's allow-list (Options.GenericResourceTypes).
	GenericResourceTypes []string
	// RateLimiter backs off failing ARM resources (Options.RateLimiter).
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
	// PostgreSQLDial connects the User controller to servers (nil: resolve their Azure names);
	// tests in one process give the local cloud's addresses.
	PostgreSQLDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Setup adds a reconciler of every kind to mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts SetupOptions) error {
	settings := credentials.Settings{Azure: opts.Azure, Global: opts.GlobalCredential}
	if opts.GlobalCredential == nil {
		var err error
		if settings, err = credentials.SettingsFromConfig(opts.Azure); err != nil {
			return fmt.Errorf("configure credentials: %w", err)
		}
	}
	settings.TokenSource = opts.TokenSource
	creds := credentials.NewResolver(mgr.GetClient(), settings)
	// Every ARM client below is built from opts.ARM: one place to count their requests.
	armmetrics.Register()
	opts.ARM = armmetrics.With(opts.ARM)
	writer := exports.NewKubeWriter(mgr.GetClient())
	kv := &exports.KeyVaultWriter{Azure: opts.Azure, Options: opts.KeyVault}
	for _, k := range armresource.Kinds() {
		r := armresource.New(mgr.GetClient(), armresource.Options{
			Kind: k, Credentials: creds, ARM: opts.ARM, Exports: writer,
			KeyVault: kv, ExportKeyVault: opts.ExportKeyVault,
			Recorder: mgr.GetEventRecorder("cerulean-manager"), APIReader: mgr.GetAPIReader(),
			SyncPeriod: opts.SyncPeriod, PollInterval: opts.PollInterval, RateLimiter: opts.RateLimiter,
			AllowUngrantedScopes: opts.AllowUngrantedScopes, GenericResourceTypes: opts.GenericResourceTypes,
		})
		if err := r.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("set up %s controller: %w", k.GVK.Kind, err)
		}
	}
	users := pguser.New(mgr.GetClient(), pguser.Options{Recorder: mgr.GetEventRecorder("cerulean-manager"), Dial: opts.PostgreSQLDial, SyncPeriod: opts.SyncPeriod})
	if err := users.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("set up User controller: %w", err)
	}
	if err := setupControlPlaneIdentities(ctx, mgr, opts, creds); err != nil {
		return err
	}
	// Credential Secrets stay while the objects that authenticate with them live.
	var armKinds []schema.GroupVersionKind
	for _, k := range armresource.Kinds() {
		armKinds = append(armKinds, k.GVK)
	}
	guarded := append([]schema.GroupVersionKind{ceruleanv1alpha1.GroupVersion.WithKind("ControlPlaneIdentities")}, armKinds...)
	if err := registerReady(mgr.GetCache(), armKinds); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if err := credentials.SetupGuard(mgr, guarded); err != nil {
		return fmt.Errorf("set up credential guard: %w", err)
	}
	return setupPodIdentity(ctx, mgr, opts, creds)
}

// setupControlPlaneIdentities adds the ControlPlaneIdentities controller: ARM reads, the
// managed-identity data plane and Key Vault, with the object's credential.
func setupControlPlaneIdentities(ctx context.Context, mgr ctrl.Manager, opts SetupOptions, creds *credentials.Resolver) error {
	identityURL := opts.IdentityURL
	if identityURL == "" {
		identityURL = opts.Azure.IdentityURL()
	}
	audience := opts.Azure.ResourceManagerAudience
	if audience == "" {
		audience = "https://management.core.windows.net/"
	}
	sdk := &controlplaneidentities.SDK{ARM: opts.ARM, KeyVault: opts.KeyVault, IdentityURL: identityURL,
		Scope: strings.TrimSuffix(audience, "/") + "/.default"}
	if err := controlplaneidentities.Setup(ctx, mgr, controlplaneidentities.Options{Azure: sdk, Credentials: creds,
		Recorder: mgr.GetEventRecorder("cerulean-manager"), Clock: opts.Clock, Resync: opts.ControlPlaneResync}); err != nil {
		return fmt.Errorf("set up ControlPlaneIdentities controller: %w", err)
	}
	return nil
}

// setupPodIdentity adds the pod-identity assignment controller in the mode asked for. Its ARM
// calls use the manager's global credential, resolved at each call.
func setupPodIdentity(ctx context.Context, mgr ctrl.Manager, opts SetupOptions, creds *credentials.Resolver) error {
	pi := podidentity.Options{AllowUngrantedIdentities: opts.AllowUngrantedIdentities}
	switch opts.PodIdentity {
	case "off":
		return nil
	case "managed":
		pi.Managed = true
	case "", "standard":
		pi.Compute = &podidentity.ARMCompute{Credential: globalCredential{creds}, Options: opts.ARM, PollFrequency: opts.PollInterval}
	default:
		return fmt.Errorf("set up pod identity: mode %q is none of standard, managed, off", opts.PodIdentity)
	}
	if err := podidentity.Setup(ctx, mgr, pi); err != nil {
		return fmt.Errorf("set up pod identity controller: %w", err)
	}
	return nil
}

// globalCredential is the manager's global credential, resolved when a token is needed (a
// cluster-scoped object has no namespace or per-resource secret).
type globalCredential struct{ r *credentials.Resolver }

func (g globalCredential) GetToken(ctx context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c, err := g.r.For(ctx, &corev1.Node{})
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("resolve global credential: %w", err)
	}
	return c.Cached().GetToken(ctx, o)
}
