package devenv

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud/clouddns"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// Services and DNS for pods, as in any cluster: kube-proxy (nftables mode) gives ClusterIPs to
// pods and to this machine, and CoreDNS, a host process on the node's address, answers
// cluster.local from the API, forwards Azure's zones to the local cloud's DNS and answers
// NXDOMAIN for every other name, so no lookup leaves the machine. The kube-dns Service names
// CoreDNS, and the kubelet gives its ClusterIP to every pod.
const (
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// DNSServiceIP is the kube-dns Service's ClusterIP, the kubelet's clusterDNS.
	DNSServiceIP = "10.0.0.10"
	// CloudDNSAddr is where CoreDNS sends Azure's zones: the local cloud answers there once
	// attached (cloud.ServeDNSOn); until then those names fail (SERVFAIL).
	CloudDNSAddr = NodeIP + ":1053"
	// CloudHTTPSAddr is where the local cloud serves HTTPS for Azure's names to pods
	// (cloud.ServeHTTPSOn): port 443, as the SDKs' defaults dial.
	CloudHTTPSAddr = NodeIP + ":443"

	// The node's address is this node's alone (the machine's lock), so fixed ports on it are free.
	coreDNSReadyAddr    = NodeIP + ":8181"
	kubeProxyHealthAddr = NodeIP + ":10256"
	kubeProxyMetrics    = NodeIP + ":10249"
	// kubeProxyTable is the nftables table kube-proxy writes, in the ip and ip6 families.
	kubeProxyTable = "kube-proxy"
	// coreDNSUser is CoreDNS's identity (its client certificate's CN), allowed to read what it serves.
	coreDNSUser = "system:coredns"
)

func (n nodePaths) kubeProxyConfig() string { return n.path("kube-proxy.yaml") }
func (n nodePaths) corefile() string        { return n.path("Corefile") }

// kubeProxyConfig is kube-proxy's configuration; each setting that differs from the defaults
// keeps it to this node: its address only, no sysctl it would change (conntrack limits and
// timeouts stay as they are), oom_score_adj 0 (this machine refuses lower), and every Service
// connection masqueraded to the node's address, so a reply between two pods of the bridge comes
// back through the node's conntrack whatever br_netfilter does.
func kubeProxyConfig(dataDir string) string {
	q := strconv.Quote
	return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: ` + q(filepath.Join(dataDir, "kube-proxy.kubeconfig")) + `
hostnameOverride: ` + NodeName + `
bindAddress: ` + NodeIP + `
healthzBindAddress: ` + kubeProxyHealthAddr + `
metricsBindAddress: ` + kubeProxyMetrics + `
clusterCIDR: ` + ClusterCIDR + `
detectLocalMode: ClusterCIDR
nodePortAddresses: [` + q(NodeIP+"/32") + `]
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
nftables:
  masqueradeAll: true
`
}

// corefile is CoreDNS's configuration: three server blocks on the node's address, port 53.
func corefile(dataDir string) string {
	bind := "    bind " + NodeIP + "\n"
	return ClusterDomain + " in-addr.arpa ip6.arpa {\n" + bind +
		"    errors\n" +
		"    ready " + coreDNSReadyAddr + "\n" +
		"    kubernetes " + ClusterDomain + " in-addr.arpa ip6.arpa {\n" +
		"        kubeconfig " + strconv.Quote(filepath.Join(dataDir, "coredns.kubeconfig")) + " cerulean\n" +
		"        pods insecure\n" +
		"        ttl 5\n" +
		"    }\n" +
		"}\n" +
		strings.Join(clouddns.Zones, " ") + " {\n" + bind +
		"    errors\n" +
		"    forward . " + CloudDNSAddr + "\n" +
		"}\n" +
		". {\n" + bind +
		"    errors\n" +
		"    template ANY ANY {\n" +
		"        rcode NXDOMAIN\n" +
		"    }\n" +
		"}\n"
}

// ensureDNSObjects writes CoreDNS's RBAC (as the upstream manifests grant it) and the kube-dns
// Service with an EndpointSlice naming CoreDNS on the node's address. Idempotent: a restart on
// the same data directory finds them.
func ensureDNSObjects(ctx context.Context, cs kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: coreDNSUser}},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS",
		}},
		Spec: corev1.ServiceSpec{
			ClusterIP: DNSServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-node", Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns", discoveryv1.LabelManagedBy: "cerulean-node",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{NodeIP}, NodeName: ptr(NodeName), Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("dns"), Port: ptr[int32](53), Protocol: ptr(corev1.ProtocolUDP)},
			{Name: ptr("dns-tcp"), Port: ptr[int32](53), Protocol: ptr(corev1.ProtocolTCP)},
		},
	}
	if err := createOrUpdate(ctx, role, cs.RbacV1().ClusterRoles().Create, cs.RbacV1().ClusterRoles().Update); err != nil {
		return fmt.Errorf("create CoreDNS's role: %w", err)
	}
	if err := createOrUpdate(ctx, binding, cs.RbacV1().ClusterRoleBindings().Create, cs.RbacV1().ClusterRoleBindings().Update); err != nil {
		return fmt.Errorf("create CoreDNS's role binding: %w", err)
	}
	// Looked up first: the apiserver allocates a create's ClusterIP before it finds the name
	// taken, so a second create fails on the IP instead of AlreadyExists.
	services := cs.CoreV1().Services(metav1.NamespaceSystem)
	if _, err := services.Get(ctx, svc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, svc, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the kube-dns Service: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("read the kube-dns Service: %w", err)
	}
	slices := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem)
	if err := createOrUpdate(ctx, slice, slices.Create, slices.Update); err != nil {
		return fmt.Errorf("create the kube-dns EndpointSlice: %w", err)
	}
	return nil
}

// createOrUpdate creates obj, or replaces the object of its name with it.
func createOrUpdate[T metav1.Object](ctx context.Context, obj T, create func(context.Context, T, metav1.CreateOptions) (T, error), update func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = update(ctx, obj, metav1.UpdateOptions{})
	return err
}

func ptr[T any](v T) *T { return &v }

// httpReady polls a plain-HTTP health endpoint (kube-proxy's, CoreDNS's) until it answers 200.
func httpReady(url string) func(context.Context) error {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	return func(ctx context.Context) error {
		_, err := httpGet(ctx, client, url)
		return err
	}
}

// startServices starts kube-proxy and CoreDNS as the node's processes and waits for both.
func (n *Node) startServices(ctx context.Context, cs kubernetes.Interface, timeout time.Duration, say func(string)) error {
	dataDir := n.cp.DataDir
	for _, f := range []struct{ path, data string }{
		{n.paths.kubeProxyConfig(), kubeProxyConfig(dataDir)},
		{n.paths.corefile(), corefile(dataDir)},
	} {
		if err := fsutil.WriteFileAtomic(f.path, []byte(f.data), 0o644); err != nil { //nolint:gosec // configuration, no secrets
			return fmt.Errorf("write node configuration: %w", err)
		}
	}
	say("starting kube-proxy (nftables)…")
	if err := n.start("kube-proxy", filepath.Join(n.cp.binDir, "kube-proxy"), []string{"--config=" + n.paths.kubeProxyConfig(), "--v=1"}, nil); err != nil {
		return err
	}
	if err := n.waitReady(ctx, timeout, "kube-proxy", httpReady("http://"+kubeProxyHealthAddr+"/healthz")); err != nil {
		return err
	}
	if err := ensureDNSObjects(ctx, cs); err != nil {
		return err
	}
	say("starting CoreDNS on " + NodeIP + ":53 (Service " + DNSServiceIP + ")…")
	if err := n.start("coredns", filepath.Join(n.cp.binDir, "coredns"), []string{"-conf", n.paths.corefile()}, nil); err != nil {
		return err
	}
	return n.waitReady(ctx, timeout, "CoreDNS", httpReady("http://"+coreDNSReadyAddr+"/ready"))
}

// nodeTables lists the nftables tables the node's processes write and leave when they die:
// kube-proxy's (ip and ip6; it leaves them even when stopped) and the node agent's, whose
// metadata DNAT would send pods to a port nothing listens on once the agent is gone.
func nodeTables(c *nftables.Conn) ([]*nftables.Table, error) {
	tables, err := c.ListTables()
	if err != nil {
		return nil, err
	}
	var ours []*nftables.Table
	for _, t := range tables {
		proxy := t.Name == kubeProxyTable && (t.Family == nftables.TableFamilyIPv4 || t.Family == nftables.TableFamilyIPv6)
		agent := t.Name == nodeagent.DefaultTable && t.Family == nftables.TableFamilyIPv4
		if proxy || agent {
			ours = append(ours, t)
		}
	}
	return ours, nil
}

// removeNodeTables deletes the tables nodeTables lists.
func removeNodeTables() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("remove the node's nftables tables: %w", err)
	}
	tables, err := nodeTables(c)
	if err != nil {
		return fmt.Errorf("list the nftables tables: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	for _, t := range tables {
		c.DelTable(t)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("remove the node's nftables tables: %w", err)
	}
	return nil
}

// nodeTablesLeft names the node's tables still on the machine.
func nodeTablesLeft() []string {
	c, err := nftables.New()
	if err != nil {
		return nil
	}
	tables, _ := nodeTables(c)
	var left []string
	for _, t := range tables {
		left = append(left, fmt.Sprintf("nftables table %s (family %d)", t.Name, t.Family))
	}
	return left
}
