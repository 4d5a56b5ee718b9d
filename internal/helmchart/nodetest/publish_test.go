package nodetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/helmchart"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/images/registrytest"
)

// version is the release's: the image's tag and the packaged chart's version and appVersion.
const version = "0.0.0-nodetest"

// publish builds the product image as `make image` does, pushes it as `make image-push` does to
// a registry on loopback, lets the node's containerd pull from it over plain HTTP (a hosts.toml
// for that registry beside the node's refuse-everything default) and runs `cerulean version`
// from it in a pod. It returns the image's repository.
func publish(t *testing.T, node *devenv.Node) string {
	t.Helper()
	ctx := t.Context()
	host := registrytest.Start(t, registrytest.Options{})
	archive := filepath.Join(t.TempDir(), "cerulean-image.tar")
	if _, err := images.BuildProduct(ctx, images.ProductOptions{Out: archive, Version: version, Revision: "nodetest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := images.Push(ctx, images.PushOptions{Archive: archive, Registry: host + "/test", Keychain: authn.NewMultiKeychain()}); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(node.Dir, "registry", host)
	if err := os.MkdirAll(hosts, 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(hosts) })
	toml := "server = \"http://" + host + "\"\n\n[host.\"http://" + host + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(toml), 0o644); err != nil { //nolint:gosec // configuration, no secrets
		t.Fatal(err)
	}
	repository := host + "/test/" + images.ProductRepository

	cs, err := kubernetes.NewForConfig(devenvtest.ControlPlane(t).RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ns := "pulled-image"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "version"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{
			Name: "cerulean", Image: repository + ":" + version, ImagePullPolicy: corev1.PullAlways, Args: []string{"version"},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "version", metav1.GetOptions{})
		return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed), nil
	})
	if err != nil {
		t.Fatalf("the pod running the pushed image did not finish: %v (status %+v)", err, pod.Status)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs("version", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodSucceeded || !strings.Contains(string(logs), version) {
		t.Fatalf("cerulean version from the pulled image: phase %s, output %q; want %s", pod.Status.Phase, logs, version)
	}
	return repository
}

// packageChart packages the chart as `make chart` does and returns the .tgz.
func packageChart(t *testing.T, h *helmchart.Helm, dir string) string {
	t.Helper()
	out := t.TempDir()
	if _, err := h.Run(t.Context(), "package", dir, "--version", version, "--app-version", version, "--destination", out); err != nil {
		t.Fatal(err)
	}
	tgz := filepath.Join(out, "cerulean-"+version+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		t.Fatalf("helm package: %v", err)
	}
	return tgz
}
