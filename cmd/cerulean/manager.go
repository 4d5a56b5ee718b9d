package main

import (
	"log/slog"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func newManagerCommand() *cobra.Command {
	opts := manager.Options{}
	var kubeconfig string
	var verbose bool
	var hookPort int
	var hookHost, hookService, hookNamespace string
	var exportVault string
	var allowIDs, allowScopes bool
	var genericTypes []string
	var proxyImage, proxyInitImage string
	var kubeQPS float32
	var kubeBurst int
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers: Azure resources from manifests",
		Long: `Reconciles Azure Service Operator v2 resources (ResourceGroup, UserAssignedIdentity,
FederatedIdentityCredential, Vault, RoleAssignment, StorageAccount, ManagedCluster, ...) through
ARM, and cerulean.dev AzureResource (any ARM type) for the types --generic-resource-types allows.

Environment: the global credential and cloud as AZURE_TENANT_ID, AZURE_CLIENT_ID,
AZURE_CLIENT_SECRET (or AZURE_CLIENT_CERTIFICATE_PATH), AZURE_SUBSCRIPTION_ID, AZURE_AUTHORITY_HOST,
AZURE_RESOURCE_MANAGER_ENDPOINT, AZURE_RESOURCE_MANAGER_AUDIENCE, SSL_CERT_FILE; AZURE_SYNC_PERIOD
(default 1h) and AZURE_TARGET_NAMESPACES (comma-separated; default all); PROXY_IMAGE and
PROXY_INIT_IMAGE (the workload identity proxy sidecar's images, as the upstream webhook reads them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			poll, leader, leaderNS, metrics, health, podIdentity, profiling := opts.PollInterval, opts.LeaderElection, opts.LeaderElectionNamespace, opts.MetricsAddr, opts.HealthAddr, opts.PodIdentity, opts.Profiling
			if err := manager.FromEnv(&opts, os.Getenv); err != nil {
				return err
			}
			if cmd.Flags().Changed("export-key-vault") {
				opts.ExportKeyVault = exportVault
			}
			opts.PollInterval, opts.LeaderElection, opts.LeaderElectionNamespace, opts.MetricsAddr, opts.HealthAddr = poll, leader, leaderNS, metrics, health
			opts.PodIdentity, opts.Profiling = podIdentity, profiling
			opts.AllowUngrantedIdentities, opts.AllowUngrantedScopes = allowIDs, allowScopes
			opts.GenericResourceTypes = genericTypes
			var wi workloadidentity.Config
			if err := wi.SetProxyImages(os.Getenv, given(cmd, "proxy-image", proxyImage), given(cmd, "proxy-init-image", proxyInitImage)); err != nil {
				return err
			}
			rc, err := manager.RESTConfig(kubeconfig)
			if err != nil {
				return err
			}
			rc.QPS, rc.Burst = kubeQPS, kubeBurst
			opts.REST = rc
			if hookPort > 0 {
				opts.Webhooks = webhookOptions(hookHost, hookPort, hookService, hookNamespace, os.Getenv("POD_NAMESPACE"))
				opts.Webhooks.WorkloadIdentity = wi
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			handler := slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})
			opts.Logger = logr.FromSlogHandler(handler)
			if _, err := manager.TuneMemory(os.Getenv, memlimit.FromCgroup, slog.New(handler)); err != nil {
				// Not a reason to stop: Go's own limit (none) applies.
				opts.Logger.Error(err, "Cannot read the container's memory limit; running without a soft memory limit")
			}
			return manager.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then in-cluster)")
	f.Float32Var(&kubeQPS, "kube-api-qps", manager.DefaultKubeQPS, "requests a second to kube-apiserver, sustained (a negative value: no client-side limit)")
	f.IntVar(&kubeBurst, "kube-api-burst", manager.DefaultKubeBurst, "requests to kube-apiserver allowed at once above --kube-api-qps")
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "127.0.0.1:8080", `address of the metrics endpoint ("0" turns it off)`)
	f.BoolVar(&opts.Profiling, "profiling", false, "serve Go's profiles (heap, CPU, goroutines) under /debug/pprof/ on the metrics endpoint")
	f.StringVar(&opts.HealthAddr, "health-addr", "127.0.0.1:8081", `address of /healthz and /readyz ("0" turns them off)`)
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active replica through a Lease")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's)")
	f.StringVar(&opts.PodIdentity, "pod-identity", "standard", "pod identity's assignment controller: standard (assign identities to nodes through ARM), managed (identities already assigned; no ARM writes) or off")
	f.DurationVar(&opts.PollInterval, "poll-interval", 0, "the longest wait between polls of a running ARM operation; ARM's Retry-After makes it shorter (default 10s)")
	f.StringVar(&exportVault, "export-key-vault", "", "Key Vault URL for secret exports (default: CERULEAN_EXPORT_KEY_VAULT; none: Kubernetes Secrets)")
	f.BoolVar(&allowIDs, "allow-ungranted-identities", false, "let any namespace use any pod identity, as aad-pod-identity does (default: only identities a NamespaceGrant gives the namespace)")
	f.BoolVar(&allowScopes, "allow-ungranted-scopes", false, "trust the global credential cluster-wide, as Azure Service Operator does (default: a namespace's resources stay inside the ARM scopes a NamespaceGrant gives it)")
	f.StringSliceVar(&genericTypes, "generic-resource-types", nil, `ARM types the generic kind (AzureResource) may create, comma-separated, case-insensitive; "Namespace/*" allows a provider's every type (default: none, every AzureResource is refused)`)
	f.BoolVar(&verbose, "v", false, "log at debug level")
	f.IntVar(&hookPort, "webhook-port", 0, "serve the admission webhooks (workload identity) on this port; 0 serves none")
	f.StringVar(&hookHost, "webhook-host", "127.0.0.1", "address the webhooks listen on (registered by URL unless --webhook-service)")
	f.StringVar(&hookService, "webhook-service", "", "in a cluster: the Service in front of the webhooks (port 443), in --webhook-namespace")
	f.StringVar(&hookNamespace, "webhook-namespace", "", "namespace of the webhooks' CA Secret and Service (default: POD_NAMESPACE, else default)")
	f.StringVar(&proxyImage, "proxy-image", "", "image of the workload identity proxy sidecar, injected into pods annotated azure.workload.identity/inject-proxy-sidecar (default: PROXY_IMAGE; none: such pods get a warning and no sidecar)")
	f.StringVar(&proxyInitImage, "proxy-init-image", "", "image of the proxy's init container, which sends the pod's IMDS traffic to the sidecar; set with --proxy-image (default: PROXY_INIT_IMAGE)")
	return cmd
}

// given is the flag's value when the command line sets it (even empty), else nil.
func given(cmd *cobra.Command, flag, value string) *string {
	if !cmd.Flags().Changed(flag) {
		return nil
	}
	return &value
}

func webhookOptions(host string, port int, service, namespace, podNamespace string) *webhooks.Options {
	if namespace == "" {
		namespace = podNamespace
	}
	if namespace == "" {
		namespace = "default"
	}
	o := &webhooks.Options{Namespace: namespace, Host: host, Port: port}
	if service != "" {
		o.Service = &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: service, Port: ptr.To[int32](443)}
	}
	return o
}
