package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// AnonymousIssuerDiscoveryBinding lets unauthenticated callers read the service-account issuer's
// discovery documents, as an AKS issuer is readable: Entra ID fetches them without credentials.
const AnonymousIssuerDiscoveryBinding = "cerulean:anonymous-service-account-issuer-discovery"

func etcdArgs(dataDir string, p ports) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(p.EtcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(p.EtcdPeer)
	return []string{
		"--name=cerulean",
		"--data-dir=" + filepath.Join(dataDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=cerulean=" + peer,
		"--log-level=warn",
	}
}

func apiServerArgs(cp *ControlPlane, p ports, pki pkiFiles) []string {
	return []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(p.EtcdClient),
		"--bind-address=127.0.0.1",
		// Without these, kube-apiserver advertises a host address that may not exist here and
		// publishes a jwks_uri nobody can reach. The node's address is the kubernetes Service's
		// endpoint, where the node relays to loopback (node_apiserver.go); without a node,
		// nothing uses it.
		"--advertise-address=" + NodeIP,
		"--secure-port=" + strconv.Itoa(p.APIServer),
		"--tls-cert-file=" + pki.servingCert(),
		"--tls-private-key-file=" + pki.servingKey(),
		"--client-ca-file=" + pki.caCert(),
		"--service-account-issuer=" + cp.IssuerURL,
		"--service-account-jwks-uri=" + cp.IssuerURL + "/openid/v1/jwks",
		"--service-account-key-file=" + pki.saVerifyingKey(),
		"--service-account-signing-key-file=" + pki.saSigningKey(),
		"--service-cluster-ip-range=" + ServiceCIDR,
		// Webhooks and aggregated APIs behind a Service are called at their endpoints (pod IPs,
		// which this machine reaches over the node's bridge), not at the ClusterIP: a control
		// plane may run without a node, and so without kube-proxy. kube-apiserver uses one
		// service resolver for both.
		"--enable-aggregator-routing=true",
		"--authorization-mode=Node,RBAC",
		// How kube-apiserver calls the node's kubelet (logs, exec, port-forward): by the node's
		// InternalIP (its host name would go through this machine's resolver), verifying the
		// kubelet's serving certificate, and presenting a client certificate of its own.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + pki.caCert(),
		"--kubelet-client-certificate=" + pki.apiserverKubeletCert(),
		"--kubelet-client-key=" + pki.apiserverKubeletKey(),
		"--anonymous-auth=true",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=1",
	}
}

func controllerManagerArgs(dataDir string, p ports, pki pkiFiles) []string {
	kubeconfig := filepath.Join(dataDir, "kube-controller-manager.kubeconfig")
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(p.ControllerManager),
		"--tls-cert-file=" + pki.servingCert(),
		"--tls-private-key-file=" + pki.servingKey(),
		"--service-account-private-key-file=" + pki.saSigningKey(),
		"--root-ca-file=" + pki.caCert(),
		"--use-service-account-credentials=true",
		// The node gets its pod subnet from here, as in a cluster.
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + ClusterCIDR,
		"--node-cidr-mask-size=24",
		"--leader-elect=false",
		"--profiling=false",
		"--v=1",
	}
}

// writeKubeconfigs writes the admin kubeconfig (DIR/kubeconfig) and the controller manager's, and
// returns the admin's rest.Config.
func writeKubeconfigs(dataDir, server string, pki pkiFiles) (*rest.Config, error) {
	admin := kubeconfig(server, pki.caCert(), pki.adminCert(), pki.adminKey())
	path := filepath.Join(dataDir, "kubeconfig")
	if err := writeKubeconfig(admin, path); err != nil {
		return nil, err
	}
	for name, pair := range map[string][2]string{
		"kube-controller-manager": {pki.kcmCert(), pki.kcmKey()},
		"kube-scheduler":          {pki.schedCert(), pki.schedKey()},
		"kubelet":                 {pki.nodeCert(), pki.nodeKey()},
		"kube-proxy":              {pki.kubeProxyCert(), pki.kubeProxyKey()},
		"coredns":                 {pki.coreDNSCert(), pki.coreDNSKey()},
	} {
		if err := writeKubeconfig(kubeconfig(server, pki.caCert(), pair[0], pair[1]), filepath.Join(dataDir, name+".kubeconfig")); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load admin kubeconfig: %w", err)
	}
	return cfg, nil
}

func kubeconfig(server, ca, cert, key string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cerulean"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: ca}
	cfg.AuthInfos["cerulean"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["cerulean"] = &clientcmdapi.Context{Cluster: "cerulean", AuthInfo: "cerulean", Namespace: "default"}
	cfg.CurrentContext = "cerulean"
	return cfg
}

func writeKubeconfig(cfg *clientcmdapi.Config, path string) error {
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

func etcdHealthy(port int) func(context.Context) error {
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	return func(ctx context.Context) error {
		body, err := httpGet(ctx, http.DefaultClient, url)
		if err != nil {
			return err
		}
		if !strings.Contains(body, `"health":"true"`) {
			return fmt.Errorf("etcd not healthy: %s", body)
		}
		return nil
	}
}

func apiServerReady(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(ctx)
		if err == nil {
			return nil
		}
		// Name the failing checks (e.g. a KMS plugin that cannot wrap): "[-]NAME failed: …".
		var failing []string
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "[-]") {
				failing = append(failing, strings.TrimPrefix(l, "[-]"))
			}
		}
		if len(failing) > 0 {
			return fmt.Errorf("%w: %s", err, strings.Join(failing, "; "))
		}
		return err
	}
}

// controllerManagerReady waits for its health endpoint and for the default ServiceAccount, which
// only a working controller manager creates.
func controllerManagerReady(cs kubernetes.Interface, port int, caPEM []byte) func(context.Context) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	return func(ctx context.Context) error {
		if _, err := httpGet(ctx, client, url); err != nil {
			return err
		}
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
}

// APIServerKubeletClient is the user kube-apiserver is when it calls a kubelet; it is bound to
// system:kubelet-api-admin, as in kubeadm's clusters.
const APIServerKubeletClient = "kube-apiserver-kubelet-client"

func bootstrapRBAC(ctx context.Context, cs kubernetes.Interface) error {
	bindings := []*rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: AnonymousIssuerDiscoveryBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Name: "cerulean:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: APIServerKubeletClient}},
	}}
	for _, binding := range bindings {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap RBAC: create %s: %w", binding.Name, err)
		}
	}
	return nil
}

func httpGet(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status + ": " + string(body))
	}
	return string(body), nil
}
