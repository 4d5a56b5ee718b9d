package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
)

func init() {
	register(section{title: "Secrets Store CSI Driver on the node", run: benchCSIDriver})
}

const csiDriverPods = 20

// benchCSIDriver times pods that mount 2 Key Vault secrets through the real kubelet, the
// upstream Secrets Store CSI Driver and `cerulean csi-provider` (service-principal auth from the
// volume's nodePublishSecretRef), created csiDriverPods at once, against the same pods without
// the volume in the same run; and counts the Key Vault GETs those mounts cost (the provider's
// cache shares them across pods of one identity). Needs root.
func benchCSIDriver(ctx context.Context, env benchEnv) ([]row, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the local node needs root")
	}
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "csidriver", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s := c.Settings()
	reader, secret, sc, err := readableVault(ctx, c, "csi-driver-reader")
	if err != nil {
		return nil, err
	}
	for _, n := range []string{"db-password", "api-key"} {
		if _, err := sc.SetSecret(ctx, n, azsecrets.SetSecretParameters{Value: to.Ptr(n + " value")}, nil); err != nil {
			return nil, err
		}
	}

	// The control plane, the node with the test-app image, the provider and the driver.
	nodeDir, err := os.MkdirTemp(env.scratch, "csidriver-")
	if err != nil {
		return nil, err
	}
	archives, err := images.Build(ctx, images.Options{OutDir: filepath.Join(nodeDir, "images"), Only: []string{images.Pause, images.TestApp}})
	if err != nil {
		return nil, err
	}
	cp, err := devenv.Start(ctx, devenv.Options{DataDir: nodeDir, BinDir: env.binDir})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	node, err := cp.StartNode(ctx, devenv.NodeOptions{ProviderID: "azure:///bench", Images: archives, LockWait: 20 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer func() { _ = node.Stop() }()
	p, err := csiprovider.New(csiprovider.Options{Azure: azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: s.URL + cloud.VaultLookupPath, CacheTTL: time.Minute})
	if err != nil {
		return nil, err
	}
	providers := filepath.Join(nodeDir, "csip")
	srv, err := csiprovider.Listen(p, filepath.Join(providers, "azure.sock"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	driver, err := node.StartSecretsStoreDriver(ctx, devenv.SecretsStoreOptions{ProvidersDir: providers})
	if err != nil {
		return nil, err
	}
	defer func() { _ = driver.Stop() }()

	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kv-creds"},
		StringData: map[string]string{"clientid": reader.ClientID, "clientsecret": secret}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	spc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
		"metadata": map[string]any{"name": "kv-bench"},
		"spec": map[string]any{"provider": "azure", "parameters": map[string]any{
			"keyvaultName": "kv-bench", "tenantId": s.TenantID,
			"objects": "array:\n  - |\n    objectName: db-password\n  - |\n    objectName: api-key\n",
		}},
	}}
	gvr := schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
	if _, err := dynamic.NewForConfigOrDie(cp.RESTConfig).Resource(gvr).Namespace("default").Create(ctx, spc, metav1.CreateOptions{}); err != nil {
		return nil, err
	}

	plain, err := podsStart(ctx, cs, "plain", false)
	if err != nil {
		return nil, fmt.Errorf("pods without the volume: %w", err)
	}
	since := c.RequestLog().Last()
	mounted, err := podsStart(ctx, cs, "kv", true)
	if err != nil {
		return nil, fmt.Errorf("pods with the volume: %w", err)
	}
	gets := len(c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodGet, Status: http.StatusOK, Principal: reader.ObjectID, Since: since}))
	pct := func(lat []time.Duration, q int) time.Duration {
		return lat[len(lat)*q/100].Round(10 * time.Millisecond)
	}
	label := fmt.Sprintf("of %d created at once", csiDriverPods)
	return []row{
		{benchmark: "pod start without a volume, create to running, p50 " + label, result: pct(plain, 50).String(), vsBaseline: "baseline"},
		{benchmark: "pod start without a volume, create to running, p99 " + label, result: pct(plain, 99).String(), vsBaseline: "baseline"},
		{benchmark: "pod start mounting 2 Key Vault secrets through the driver, p50 " + label, result: pct(mounted, 50).String(),
			vsBaseline: ratio(pct(mounted, 50).Seconds(), pct(plain, 50).Seconds())},
		{benchmark: "pod start mounting 2 Key Vault secrets through the driver, p99 " + label, result: pct(mounted, 99).String(),
			vsBaseline: ratio(pct(mounted, 99).Seconds(), pct(plain, 99).Seconds())},
		{benchmark: fmt.Sprintf("Key Vault GETs for those %d mounts (one identity; upstream's provider: %d)", csiDriverPods, 2*csiDriverPods),
			result: fmt.Sprint(gets), vsBaseline: fmt.Sprintf("1/%.0f", float64(2*csiDriverPods)/float64(max(gets, 1)))},
	}, nil
}

// podsStart creates csiDriverPods pods of the test-app image at once, with or without the Key
// Vault volume, and returns each one's time from its create call to its container running,
// sorted; then deletes them.
func podsStart(ctx context.Context, cs kubernetes.Interface, prefix string, volume bool) ([]time.Duration, error) {
	created := map[string]time.Time{}
	for i := range csiDriverPods {
		name := fmt.Sprintf("%s-%02d", prefix, i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": prefix}},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers:                    []corev1.Container{{Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullNever, Args: []string{"sleep"}}},
			},
		}
		if volume {
			pod.Spec.Volumes = []corev1.Volume{{Name: "kv", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: devenv.SecretsStoreDriverName, ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": "kv-bench"},
				NodePublishSecretRef: &corev1.LocalObjectReference{Name: "kv-creds"},
			}}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kv", MountPath: "/mnt/secrets", ReadOnly: true}}
		}
		created[name] = time.Now()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	running := map[string]time.Time{}
	selector := metav1.ListOptions{LabelSelector: "bench=" + prefix}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, selector)
		if err != nil {
			return false, nil //nolint:nilerr // retried
		}
		now := time.Now()
		for _, p := range pods.Items {
			if _, seen := running[p.Name]; !seen && p.Status.Phase == corev1.PodRunning {
				running[p.Name] = now
			}
		}
		return len(running) == csiDriverPods, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wait for %d pods: %d running: %w", csiDriverPods, len(running), err)
	}
	var lat []time.Duration
	for name, at := range running {
		lat = append(lat, at.Sub(created[name]))
	}
	slices.Sort(lat)
	if err := cs.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, selector); err != nil {
		return nil, err
	}
	// The driver unmounts as the kubelet tears the pods down: wait, so the next step starts clean.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("default").List(ctx, selector)
		return err == nil && len(pods.Items) == 0, nil
	})
	return lat, err
}
