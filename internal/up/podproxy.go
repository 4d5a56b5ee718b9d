package up

import (
	"fmt"
	"net"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/fsutil"
	"github.com/cerulean/cerulean/internal/shellenv"
)

// podNoProxy keeps the cluster's own traffic (services, pods) off the proxy.
const podNoProxy = devenv.ServiceCIDR + "," + devenv.NodePodCIDR + ",.svc,.cluster.local"

// servePodProxy serves the cloud's proxy on the node's address, at the loopback proxy's port,
// and writes what a pod needs into path: HTTPS_PROXY, NO_PROXY, the tenant and subscription,
// and the host path of the CA that the pod mounts and names in SSL_CERT_FILE. No secret is in it.
func servePodProxy(az *cloud.Cloud, node *devenv.Node, path string) (string, error) {
	_, port, err := net.SplitHostPort(az.Proxy().Addr())
	if err != nil {
		return "", fmt.Errorf("serve the proxy for pods: %w", err)
	}
	u, err := az.ServeProxyOn(net.JoinHostPort(node.IP, port))
	if err != nil {
		return "", fmt.Errorf("serve the proxy for pods: %w", err)
	}
	s := az.Settings()
	env := []string{
		"HTTPS_PROXY=" + shellenv.Quote(u),
		"NO_PROXY=" + shellenv.Quote(podNoProxy),
		"AZURE_TENANT_ID=" + shellenv.Quote(s.TenantID),
		"AZURE_SUBSCRIPTION_ID=" + shellenv.Quote(s.SubscriptionID),
		"CERULEAN_CA_FILE=" + shellenv.Quote(s.CAFile),
	}
	if err := fsutil.WriteFileAtomic(path, []byte(cloud.FormatEnv(env)), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return u, nil
}

// serveAzureNames gives pods Azure's public names without a proxy: the cloud's DNS where the
// node's CoreDNS forwards Azure's zones, and HTTPS by SNI on port 443 of the node's address,
// which that DNS answers. Pods then need only the cloud's CA.
func serveAzureNames(az *cloud.Cloud) error {
	if err := az.ServeHTTPSOn(devenv.CloudHTTPSAddr); err != nil {
		return fmt.Errorf("serve Azure's names to pods: %w", err)
	}
	if _, err := az.ServeDNSOn(devenv.CloudDNSAddr); err != nil {
		return fmt.Errorf("serve Azure's names to pods: %w", err)
	}
	return nil
}
