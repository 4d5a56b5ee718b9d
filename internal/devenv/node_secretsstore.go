package devenv

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/kubeletplugin"
	"github.com/cerulean/cerulean/internal/manifests"
	"github.com/cerulean/cerulean/internal/pki"
)

// The upstream Secrets Store CSI Driver, run beside the kubelet as a host process (as its
// DaemonSet's privileged container would run on a cluster's node): hack/tools builds it into
// bin/ with its released manifests beside it.
const (
	// SecretsStoreDriverName is the driver's CSI name, the CSIDriver object's.
	SecretsStoreDriverName = "secrets-store.csi.k8s.io"
	// SecretsStoreDriverBinary is the driver's program in bin/.
	SecretsStoreDriverBinary = "secrets-store-csi-driver"
	// SecretsStoreManifestsDir, in bin/, holds the driver's released CRDs, CSIDriver and RBAC.
	SecretsStoreManifestsDir = "secrets-store-csi-driver-manifests"
	// SecretsStoreServiceAccount is the driver's identity: the upstream RBAC binds its roles to
	// this ServiceAccount, and the driver authenticates as it with a client certificate.
	SecretsStoreServiceAccount = "system:serviceaccount:kube-system:secrets-store-csi-driver"
	// TokenExchangeAudience is the audience of the service-account token the kubelet passes to
	// the driver for each mount (the CSIDriver's tokenRequests), as Azure's provider needs it.
	TokenExchangeAudience = "api://AzureADTokenExchange" //nolint:gosec // an audience, not a credential
)

// The driver's released manifests, applied in this order (CRDs before anything uses them).
var secretsStoreManifests = []string{
	"secrets-store.csi.x-k8s.io_secretproviderclasses.yaml",
	"secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml",
	"csidriver.yaml",
	"rbac-secretproviderclass.yaml",
	"rbac-secretprovidertokenrequest.yaml",
	"rbac-secretproviderrotation.yaml",
}

// SecretsStoreOptions configure StartSecretsStoreDriver.
type SecretsStoreOptions struct {
	// ProvidersDir is where providers serve their sockets (PROVIDER.sock): the driver's
	// --provider-volume.
	ProvidersDir string
	// RotationInterval turns on the driver's rotation at this poll interval; 0 leaves it off.
	RotationInterval time.Duration
	// TokenAudiences are the CSIDriver's tokenRequests; empty means TokenExchangeAudience.
	TokenAudiences []string
	// ReadyTimeout bounds the wait for the driver and its registration; 0 means a minute.
	ReadyTimeout time.Duration
}

// SecretsStoreDriver is the running driver, registered with the node's kubelet.
type SecretsStoreDriver struct {
	// Endpoint is the driver's CSI socket.
	Endpoint string
	node     *Node
	child    *child
	reg      *kubeletplugin.Registration
}

// StartSecretsStoreDriver installs the driver's CRDs, CSIDriver object and RBAC, starts the
// driver beside the kubelet, registers it with the kubelet, and returns once the node's CSINode
// lists it. Node.Stop stops it too.
func (n *Node) StartSecretsStoreDriver(ctx context.Context, o SecretsStoreOptions) (_ *SecretsStoreDriver, err error) {
	if o.ProvidersDir == "" {
		return nil, errors.New("start the secrets store CSI driver: a providers directory is required")
	}
	if len(o.TokenAudiences) == 0 {
		o.TokenAudiences = []string{TokenExchangeAudience}
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = time.Minute
	}
	bin := filepath.Join(n.cp.binDir, SecretsStoreDriverBinary)
	manifests := filepath.Join(n.cp.binDir, SecretsStoreManifestsDir)
	if !exists(bin) || !exists(filepath.Join(manifests, secretsStoreManifests[0])) {
		return nil, fmt.Errorf("%s or its manifests not found in %s: run `make node` to build it", SecretsStoreDriverBinary, n.cp.binDir)
	}
	if err := os.MkdirAll(o.ProvidersDir, 0o755); err != nil { //nolint:gosec // the providers directory is shared with providers
		return nil, fmt.Errorf("start the secrets store CSI driver: %w", err)
	}
	if err := n.applySecretsStoreManifests(ctx, manifests, o.TokenAudiences); err != nil {
		return nil, err
	}
	kubeconfigPath, err := n.secretsStoreKubeconfig()
	if err != nil {
		return nil, err
	}

	pluginDir := filepath.Join(n.paths.kubeletRoot(), "plugins", "csi-secrets-store")
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		return nil, fmt.Errorf("start the secrets store CSI driver: %w", err)
	}
	d := &SecretsStoreDriver{Endpoint: filepath.Join(pluginDir, "csi.sock")}
	_ = os.Remove(d.Endpoint) // a driver that was killed leaves its socket
	args := []string{
		"--endpoint=unix://" + d.Endpoint,
		"--nodeid=" + n.Name,
		"--provider-volume=" + o.ProvidersDir,
		"--additional-provider-volume-paths=" + o.ProvidersDir,
		"--metrics-addr=0", // no metrics listener: nothing on this machine scrapes it
		"-v=2",
	}
	if o.RotationInterval > 0 {
		args = append(args, "--enable-secret-rotation=true", "--rotation-poll-interval="+o.RotationInterval.String())
	}
	c, err := startChild(SecretsStoreDriverBinary, bin, args, filepath.Join(n.cp.logs, SecretsStoreDriverBinary+".log"), []string{"KUBECONFIG=" + kubeconfigPath})
	if err != nil {
		return nil, err
	}
	n.addChild(c)
	d.node, d.child = n, c
	defer func() {
		if err != nil {
			_ = d.stop()
		}
	}()
	waitCtx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	if err := n.waitReady(waitCtx, o.ReadyTimeout, SecretsStoreDriverBinary, func(context.Context) error {
		if !exists(d.Endpoint) {
			return errors.New("no CSI socket yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	d.reg, err = kubeletplugin.Register(kubeletplugin.Options{
		RegistryDir: filepath.Join(n.paths.kubeletRoot(), "plugins_registry"),
		DriverName:  SecretsStoreDriverName,
		Endpoint:    d.Endpoint,
	})
	if err != nil {
		return nil, err
	}
	if err := d.reg.Wait(waitCtx); err != nil {
		return nil, fmt.Errorf("register the secrets store CSI driver: %w; kubelet log %s", err, filepath.Join(n.cp.logs, "kubelet.log"))
	}
	cs, err := kubernetes.NewForConfig(n.cp.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("start the secrets store CSI driver: %w", err)
	}
	if err := n.waitReady(waitCtx, o.ReadyTimeout, "CSINode "+n.Name+" listing "+SecretsStoreDriverName, func(ctx context.Context) error {
		csiNode, err := cs.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == SecretsStoreDriverName }) {
			return errors.New("not listed yet")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return d, nil
}

// Stop unregisters the driver from the kubelet and stops it. Mounts it made stay until their
// pods go (the node's teardown removes what is left).
func (d *SecretsStoreDriver) Stop() error {
	if d == nil {
		return nil
	}
	return d.stop()
}

func (d *SecretsStoreDriver) stop() error {
	var err error
	if d.reg != nil {
		err = d.reg.Close()
		d.reg = nil
	}
	if d.child != nil {
		d.node.removeChild(d.child)
		d.child.stop(10 * time.Second)
		d.child = nil
	}
	return err
}

// applySecretsStoreManifests applies the driver's released manifests server-side, with the
// CSIDriver's tokenRequests set (the chart's tokenRequests value), and waits for its CRDs.
func (n *Node) applySecretsStoreManifests(ctx context.Context, dir string, audiences []string) error {
	cfg := rest.CopyConfig(n.cp.RESTConfig)
	cfg.WarningHandlerWithContext = rest.NoWarnings{} // the released CRDs carry fields the server drops
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("install the secrets store CSI driver: %w", err)
	}
	var all []*unstructured.Unstructured
	for _, name := range secretsStoreManifests {
		objs, err := manifests.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("install the secrets store CSI driver: %w", err)
		}
		for _, u := range objs {
			if u.GetKind() == "CSIDriver" {
				var reqs []any
				for _, a := range audiences {
					reqs = append(reqs, map[string]any{"audience": a})
				}
				if err := unstructured.SetNestedSlice(u.Object, reqs, "spec", "tokenRequests"); err != nil {
					return fmt.Errorf("install the secrets store CSI driver: %w", err)
				}
				// tokenRequests of an existing CSIDriver cannot change on every version: replace it.
				if err := recreateIfDifferent(ctx, c, u); err != nil {
					return err
				}
			}
		}
		all = append(all, objs...)
	}
	if err := manifests.Apply(ctx, c, "cerulean", all...); err != nil {
		return fmt.Errorf("install the secrets store CSI driver: %w", err)
	}
	return manifests.WaitEstablished(ctx, c, time.Minute, all...)
}

// recreateIfDifferent deletes an existing CSIDriver whose spec differs from want, so the apply
// creates it afresh (most of a CSIDriver's spec is immutable).
func recreateIfDifferent(ctx context.Context, c client.Client, want *unstructured.Unstructured) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(want.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKey{Name: want.GetName()}, cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("install the secrets store CSI driver: get CSIDriver: %w", err)
	}
	wantReqs, _, _ := unstructured.NestedSlice(want.Object, "spec", "tokenRequests")
	curReqs, _, _ := unstructured.NestedSlice(cur.Object, "spec", "tokenRequests")
	if fmt.Sprint(wantReqs) == fmt.Sprint(curReqs) {
		return nil
	}
	if err := c.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("install the secrets store CSI driver: replace CSIDriver: %w", err)
	}
	return nil
}

// secretsStoreKubeconfig writes the driver's kubeconfig: a client certificate for the
// ServiceAccount the upstream RBAC names, so the driver has exactly the permissions it has on a
// cluster. The certificate is made once and kept.
func (n *Node) secretsStoreKubeconfig() (string, error) {
	p := n.cp.pki
	cert, key := p.path("secrets-store-csi-driver.crt"), p.path("secrets-store-csi-driver.key")
	if !exists(cert) || !exists(key) {
		now := time.Now()
		ca, err := pki.LoadOrCreateCA(p.caCert(), p.caKey(), pkix.Name{CommonName: "cerulean-local-ca"}, now)
		if err != nil {
			return "", err
		}
		der, k, err := ca.Issue(x509.Certificate{
			Subject:     pkix.Name{CommonName: SecretsStoreServiceAccount, Organization: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, now, 5*365*24*time.Hour)
		if err != nil {
			return "", err
		}
		if err := pki.WritePair(cert, key, der, k); err != nil {
			return "", err
		}
	}
	path := filepath.Join(n.cp.DataDir, SecretsStoreDriverBinary+".kubeconfig")
	if err := writeKubeconfig(kubeconfig(n.cp.APIServerURL, p.caCert(), cert, key), path); err != nil {
		return "", err
	}
	return path, nil
}
