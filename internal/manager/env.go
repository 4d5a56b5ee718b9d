package manager

import (
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// DefaultSyncPeriod is Azure Service Operator's default.
const DefaultSyncPeriod = time.Hour

// FromEnv fills the settings Azure Service Operator reads from its environment: the global
// credential and cloud (AZURE_*), AZURE_SYNC_PERIOD and AZURE_TARGET_NAMESPACES, and Cerulean's
// CERULEAN_EXPORT_KEY_VAULT and CERULEAN_IDENTITY_URL.
func FromEnv(opts *Options, getenv func(string) string) error {
	opts.Azure = azure.ConfigFromEnv(getenv)
	if opts.Azure.CAFile == "" {
		opts.Azure.CAFile = getenv("AZURE_CA_FILE")
	}
	opts.SyncPeriod = DefaultSyncPeriod
	if s := getenv("AZURE_SYNC_PERIOD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("read AZURE_SYNC_PERIOD %q: want a positive duration such as 1h or 15m", s)
		}
		opts.SyncPeriod = d
	}
	opts.TargetNamespaces = ParseNamespaces(getenv("AZURE_TARGET_NAMESPACES"))
	opts.ExportKeyVault = getenv("CERULEAN_EXPORT_KEY_VAULT")
	opts.IdentityURL = getenv("CERULEAN_IDENTITY_URL")
	// Workload identity for the manager's own credential (the Helm chart's default): the
	// client id's token is exchanged for the projected token in AZURE_FEDERATED_TOKEN_FILE.
	if wi := getenv(credentials.KeyUseWorkloadIdentity); wi != "" && wi != "false" && wi != "0" {
		src, err := credentials.SourceFromEnv(getenv)
		if err != nil {
			return fmt.Errorf("read the manager's credential: %w", err)
		}
		opts.GlobalCredential = src
	}
	return nil
}

// RESTConfig loads a kubeconfig file, or with none the usual places (KUBECONFIG, in-cluster).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
		}
		return c, nil
	}
	c, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("find kube-apiserver: %w", err)
	}
	return c, nil
}
