package up

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/arm/generic"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// IssuerConfigMap is the ConfigMap (namespace default, key issuerURL) holding the cluster's
// OIDC issuer, which config/samples' federated credential reads.
const IssuerConfigMap = "cluster-oidc"

// CloudCAConfigMap is the ConfigMap (namespace default, key ca.crt) holding the local cloud's CA,
// which pods mount and name in SSL_CERT_FILE to reach Azure's names here (config/samples/app).
const CloudCAConfigMap = "cloud-ca"

// SyncPeriod is the manager's sync period under up: short, so drift shows quickly on one machine.
const SyncPeriod = 5 * time.Minute

// startManager installs the CRDs and runs the manager in-process with the bootstrap principal
// as the global credential and the token of ServiceAccount cerulean-system/cerulean-manager for
// workload-identity credential secrets, and wi's proxy images for the webhook; the returned
// channel yields its end. It serves its Prometheus metrics at the returned URL, on loopback.
func startManager(ctx context.Context, cp *devenv.ControlPlane, az *cloud.Cloud, dataDir string, wi workloadidentity.Config) (<-chan error, string, error) {
	if err := manager.InstallCRDs(ctx, cp.RESTConfig); err != nil {
		return nil, "", err
	}
	if err := grantSamples(ctx, cp.RESTConfig, az.Settings().SubscriptionID); err != nil {
		return nil, "", err
	}
	if err := writeClusterConfigMaps(ctx, cp, az); err != nil {
		return nil, "", err
	}
	clients, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return nil, "", fmt.Errorf("connect to kube-apiserver: %w", err)
	}
	tokens, err := ManagerTokenSource(ctx, clients, time.Now)
	if err != nil {
		return nil, "", err
	}
	logFile, err := os.OpenFile(filepath.Join(dataDir, "logs", "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("open the manager's log: %w", err)
	}
	// No pod runs here: the webhook is served on loopback and registered by URL, on a port
	// chosen at each start (the registration is rewritten with it).
	hookPort, err := freeLoopbackPort()
	if err != nil {
		_ = logFile.Close()
		return nil, "", err
	}
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		_ = logFile.Close()
		return nil, "", err
	}
	s := az.Settings()
	done := make(chan error, 1)
	go func() {
		defer logFile.Close()
		done <- manager.Run(ctx, manager.Options{
			REST: cp.RESTConfig,
			Azure: azure.Config{
				TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
				AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
				ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
			},
			SyncPeriod: SyncPeriod, PollInterval: time.Second, TokenSource: tokens,
			MetricsAddr: metricsAddr, HealthAddr: "0",
			Logger:   logr.FromSlogHandler(slog.NewJSONHandler(logFile, nil)),
			Webhooks: &webhooks.Options{Namespace: "default", Host: "127.0.0.1", Port: hookPort, WorkloadIdentity: wi},
			// The generic kind may create what the local cloud answers for (it answers nothing else).
			GenericResourceTypes: generic.Types(),
		})
	}()
	return done, "http://" + metricsAddr + "/metrics", nil
}

// writeClusterConfigMaps writes the ConfigMaps config/samples read: the cluster's issuer and the
// local cloud's CA (also the chart's azure.caBundle).
func writeClusterConfigMaps(ctx context.Context, cp *devenv.ControlPlane, az *cloud.Cloud) error {
	clients, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return fmt.Errorf("connect to kube-apiserver: %w", err)
	}
	ca, err := os.ReadFile(az.Settings().CAFile)
	if err != nil {
		return fmt.Errorf("read the local cloud's CA: %w", err)
	}
	for name, data := range map[string]map[string]string{
		IssuerConfigMap:  {"issuerURL": cp.IssuerURL},
		CloudCAConfigMap: {"ca.crt": string(ca)},
	} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Data: data}
		if _, err := clients.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("write the ConfigMap %s: %w", name, err)
		}
	}
	return nil
}

// freeLoopbackPort asks the kernel for a free port on 127.0.0.1.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choose a port on loopback: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeLoopbackAddr is 127.0.0.1 with a free port, for a listener that takes an address.
func freeLoopbackAddr() (string, error) {
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}
