package rollout

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/azure"
)

// kubeconfigOf is the cluster's kubeconfig loader: its file (or the default chain) and context.
func kubeconfigOf(cl Cluster, namespace string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cl.Kubeconfig != "" {
		rules.ExplicitPath = cl.Kubeconfig
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{
		CurrentContext: cl.Context, Context: clientcmdapi.Context{Namespace: namespace},
	})
}

// restConfig is the cluster's client configuration from its kubeconfig and context.
func restConfig(cl Cluster) (*rest.Config, error) {
	cfg, err := kubeconfigOf(cl, "").ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// restGetter gives Helm the cluster's clients with discovery cached in memory for the run
// (kubectl's getter caches it under ~/.kube/cache, one directory per API server).
type restGetter struct {
	loader clientcmd.ClientConfig
	config *rest.Config

	once      sync.Once
	discovery discovery.CachedDiscoveryInterface
	err       error
}

var _ genericclioptions.RESTClientGetter = (*restGetter)(nil)

func newRESTGetter(cl Cluster, namespace string) (*restGetter, error) {
	loader := kubeconfigOf(cl, namespace)
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return &restGetter{loader: loader, config: cfg}, nil
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.config), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(g.config)
		if err != nil {
			g.err = fmt.Errorf("create discovery client: %w", err)
			return
		}
		g.discovery = memory.NewMemCacheClient(dc)
	})
	return g.discovery, g.err
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return g.loader }

// ErrServiceAccountToken marks a probe that could not get the service account's token from the
// cluster (no such service account, no access).
var ErrServiceAccountToken = errors.New("no service account token")

// ProbeOptions say whose token to exchange and what to read.
type ProbeOptions struct {
	// Kube is the cluster whose service account token is exchanged.
	Kube kubernetes.Interface
	// Namespace, ServiceAccount and Audience of the token (TokenRequest, as the kubelet projects it).
	Namespace, ServiceAccount, Audience string
	// Azure is the cloud (tenant, authority host, CA); ClientID the identity to act as.
	Azure    azure.Config
	ClientID string
	// VaultURI and Secret are the secret to read; an empty Secret only exchanges the token.
	VaultURI, Secret string
}

// Probe does what the app's pod does with workload identity: it gets its service account's
// token for the audience, exchanges it at Entra ID for the identity's token, and reads the Key
// Vault secret. The secret's value is never returned or logged.
func Probe(ctx context.Context, o ProbeOptions) error {
	var mu sync.Mutex
	var tokenErr error // the cluster's refusal, kept apart: the SDK may not wrap it
	assertion := func(ctx context.Context) (string, error) {
		tr, err := o.Kube.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, o.ServiceAccount, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{o.Audience}, ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			err = fmt.Errorf("%w: request token of service account %s/%s: %w", ErrServiceAccountToken, o.Namespace, o.ServiceAccount, err)
			mu.Lock()
			tokenErr = err
			mu.Unlock()
			return "", err
		}
		return tr.Status.Token, nil
	}
	opts, err := o.Azure.ClientOptions()
	if err != nil {
		return err
	}
	cred, err := azure.NewCredential(azure.ClientCredential{TenantID: o.Azure.TenantID, ClientID: o.ClientID, Assertion: assertion}, opts)
	if err != nil {
		return fmt.Errorf("build workload credential: %w", err)
	}
	err = probe(ctx, o, cred)
	mu.Lock()
	defer mu.Unlock()
	if err != nil && tokenErr != nil {
		return tokenErr
	}
	return err
}

func probe(ctx context.Context, o ProbeOptions, cred azcore.TokenCredential) error {
	if o.Secret == "" {
		_, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{vaultScope(o.VaultURI)}})
		if err != nil {
			return fmt.Errorf("exchange token: %w", err)
		}
		return nil
	}
	sopts, err := o.Azure.SecretsOptions()
	if err != nil {
		return err
	}
	client, err := azsecrets.NewClient(o.VaultURI, cred, sopts)
	if err != nil {
		return fmt.Errorf("create secrets client: %w", err)
	}
	if _, err := client.GetSecret(ctx, o.Secret, "", nil); err != nil {
		return fmt.Errorf("read secret %s: %w", o.Secret, err)
	}
	return nil
}

// vaultScope is Key Vault's token scope for the vault at uri: https://vault.DOMAIN/.default for a
// vault named NAME.vault.DOMAIN (each Azure cloud has its domain), Azure's public one otherwise
// (the local cloud's vaults are addressed by port and accept it).
func vaultScope(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		if _, domain, ok := strings.Cut(u.Hostname(), ".vault."); ok {
			return "https://vault." + domain + "/.default"
		}
	}
	return "https://vault.azure.net/.default"
}

// probeError shortens a probe failure for the table: Azure's status and code, or Entra's
// AADSTS error.
func probeError(err error) string {
	if m := aadsts.FindString(err.Error()); m != "" {
		return "token exchange refused: " + m
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return fmt.Sprintf("read secret: %d %s", re.StatusCode, re.ErrorCode)
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i > 0 {
		msg = msg[:i]
	}
	return msg
}

var aadsts = regexp.MustCompile(`AADSTS[0-9]+`)
