package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
)

// hasNode reports whether `up` runs the local node here (it does as root), logging why not.
func hasNode(t *testing.T) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: `up` runs without the local node, so the pod part of this test is skipped")
		return false
	}
	return true
}

func clientset(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// caConfigMap publishes the local cloud's CA (DIR/env's SSL_CERT_FILE) for pods to mount, as a
// cluster distributes a private CA.
func caConfigMap(t *testing.T, cs kubernetes.Interface, env map[string]string, namespace string) {
	t.Helper()
	ca, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatalf("read the local cloud's CA: %v", err)
	}
	_, err = cs.CoreV1().ConfigMaps(namespace).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud-ca"}, Data: map[string]string{"ca.crt": string(ca)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap cloud-ca: %v", err)
	}
}

// readPodEnv reads DIR/pod.env, what `up` tells pods to reach the cloud through its proxy on
// the node's address.
func readPodEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pod.env"))
	if err != nil {
		t.Fatalf("read pod.env: %v", err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, value, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		env[name] = strings.Trim(value, "'")
	}
	if !strings.HasPrefix(env["HTTPS_PROXY"], "http://"+devenv.NodeIP+":") || env["CERULEAN_CA_FILE"] == "" {
		t.Fatalf("pod.env does not name the proxy on the node's address and the CA: %q", b)
	}
	return env
}

// appPod is the test-app reading secret from the vault named vaultName, on the pod network: it
// reaches the cloud under Azure's public names (NAME.vault.azure.net, login.microsoftonline.com)
// through the proxy of DIR/pod.env, trusting the cloud's CA from the ConfigMap cloud-ca.
func appPod(namespace, name, vaultName, secret string, podEnv map[string]string, env ...corev1.EnvVar) *corev1.Pod {
	env = append(env,
		corev1.EnvVar{Name: "VAULT_URL", Value: azurenames.VaultURI(vaultName)},
		corev1.EnvVar{Name: "SECRET_NAME", Value: secret},
		corev1.EnvVar{Name: "SSL_CERT_FILE", Value: "/etc/cloud-ca/ca.crt"},
		corev1.EnvVar{Name: "HTTPS_PROXY", Value: podEnv["HTTPS_PROXY"]},
		corev1.EnvVar{Name: "NO_PROXY", Value: podEnv["NO_PROXY"]},
	)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Env: env,
				VolumeMounts: []corev1.VolumeMount{{Name: "cloud-ca", MountPath: "/etc/cloud-ca", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "cloud-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-ca"},
			}}}},
		},
	}
}

// runToCompletion creates the pod (in namespace default unless it names one), waits for it to
// end and returns its log; it fails the test unless the pod succeeded.
func runToCompletion(t *testing.T, cs kubernetes.Interface, kubeconfig string, pod *corev1.Pod) string {
	t.Helper()
	ctx := t.Context()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && (got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed), nil
	})
	logs := ""
	if got != nil && len(got.Status.ContainerStatuses) > 0 && got.Status.ContainerStatuses[0].State.Terminated != nil {
		logs = kubectl(t, kubeconfig, "logs", "-n", pod.Namespace, pod.Name)
	}
	if err != nil || got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s did not succeed (%v): %+v\n%s", pod.Name, err, got.Status, logs)
	}
	return logs
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// secretReadLine is what the test-app prints after reading secret name with the given value.
func secretReadLine(t *testing.T, logs, name, value string) {
	t.Helper()
	if !strings.Contains(logs, "read secret "+name+" version ") || !strings.Contains(logs, "sha256 "+sha256Hex(value)) {
		t.Errorf("the test-app's output %q does not report secret %s with the expected value's digest", logs, name)
	}
	if strings.Contains(logs, value) {
		t.Errorf("the test-app printed the secret's value")
	}
}

// clientSecretPod reads the secret as a service principal whose secret comes from a Kubernetes
// Secret through the environment.
func clientSecretPod(t *testing.T, cs kubernetes.Interface, namespace, name, vaultName, secret string, env, podEnv map[string]string) *corev1.Pod {
	t.Helper()
	_, err := cs.CoreV1().Secrets(namespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sp-credentials"},
		StringData: map[string]string{"client-secret": env["AZURE_CLIENT_SECRET"]},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Secret sp-credentials: %v", err)
	}
	return appPod(namespace, name, vaultName, secret, podEnv,
		corev1.EnvVar{Name: "AZURE_CLIENT_ID", Value: env["AZURE_CLIENT_ID"]},
		corev1.EnvVar{Name: "AZURE_TENANT_ID", Value: env["AZURE_TENANT_ID"]},
		corev1.EnvVar{Name: "AZURE_CLIENT_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "sp-credentials"}, Key: "client-secret",
		}}},
	)
}
