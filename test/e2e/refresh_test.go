package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The kubelet refreshes a projected token once 80% of its lifetime has passed; 600 s is the
// shortest lifetime kube-apiserver grants, so the first refresh comes after 480 s (real time: the
// kubelet's clock is the machine's).
const refreshTokenSeconds = 600

// kubeletRoot is where the local node's kubelet keeps pods' volumes (devenv's host directory).
const kubeletRoot = "/run/cerulean/kubelet"

// refreshingPod is the app as a real pod of the test-app image, labelled for the webhook, with a
// token volume of its own (600 s; the webhook leaves a pod's own volume and mount alone and
// injects the rest), reading the Key Vault secret every 10 s through the cloud's proxy under
// Azure's public names, each read a new exchange of the token file as it is then (a new
// credential: azidentity reuses a file's content for 10 minutes, which assumes the webhook's
// lifetimes of an hour or more).
type refreshingPod struct {
	cs    kubernetes.Interface
	pod   *corev1.Pod
	first string // the kubelet's first token, read on the node (the test is root)
	exp1  int64
}

func startRefreshingPod(t *testing.T, cs kubernetes.Interface, ns, vaultName string, podEnv map[string]string) *refreshingPod {
	t.Helper()
	const tokenDir = "/var/run/secrets/azure/tokens"
	p := appPod(ns, "shop", vaultName, "db-password", podEnv,
		corev1.EnvVar{Name: "AZURE_AUTHORITY_HOST", Value: "https://login.microsoftonline.com/"},
		corev1.EnvVar{Name: "READ_EVERY", Value: "10s"})
	p.Labels = map[string]string{"azure.workload.identity/use": "true"}
	p.Spec.ServiceAccountName = "app"
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "azure-identity-token", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "api://AzureADTokenExchange", ExpirationSeconds: ptr.To[int64](refreshTokenSeconds), Path: "azure-identity-token",
		}}}},
	}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
		corev1.VolumeMount{Name: "azure-identity-token", MountPath: tokenDir, ReadOnly: true})
	got, err := cs.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod shop: %v", err)
	}
	pe := containerEnv(got)
	if pe["AZURE_AUTHORITY_HOST"] != "https://login.microsoftonline.com/" || pe["AZURE_CLIENT_ID"] == "" || pe["AZURE_FEDERATED_TOKEN_FILE"] != tokenDir+"/azure-identity-token" {
		t.Errorf("the webhook did not inject the identity around the pod's own settings: %v", pe)
	}
	for _, v := range got.Spec.Volumes {
		if v.Name == "azure-identity-token" && *v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != refreshTokenSeconds {
			t.Errorf("the webhook replaced the pod's own token volume: %+v", v)
		}
	}
	r := &refreshingPod{cs: cs, pod: got}
	err = wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(filepath.Join(kubeletRoot, "pods", string(got.UID), "volumes", "kubernetes.io~projected", "azure-identity-token", "azure-identity-token"))
		if err != nil {
			return false, nil
		}
		r.first = string(b)
		return true, nil
	})
	if err != nil {
		t.Fatalf("the kubelet did not project the pod's token: %v", err)
	}
	r.exp1 = jwtExp(t, r.first)
	return r
}

// logLines is the pod's output so far, one read per line.
func (r *refreshingPod) logLines(t *testing.T) []string {
	t.Helper()
	b, err := r.cs.CoreV1().Pods(r.pod.Namespace).GetLogs(r.pod.Name, &corev1.PodLogOptions{}).DoRaw(t.Context())
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// check waits for the kubelet to rewrite the token file, moves the cloud's clock past the first
// token's expiry (plus Entra ID's 2-minute skew), and shows that the first token is refused
// while the pod, with the refreshed one, goes on reading the secret; no read of the pod failed.
func (r *refreshingPod) check(t *testing.T, env map[string]string, admin azcore.TokenCredential, wi *wiFlow) {
	t.Helper()
	first := "token-exp " + strconv.FormatInt(r.exp1, 10)
	refreshed := func(l string) bool {
		return strings.HasPrefix(l, "read secret db-password ") && strings.Contains(l, " token-exp ") && !strings.HasSuffix(l, first)
	}
	var lines []string
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Second, 12*time.Minute, true, func(context.Context) (bool, error) {
		lines = r.logLines(t)
		for _, l := range lines {
			if refreshed(l) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the kubelet did not refresh the token within 12 minutes (first %s); the pod's output:\n%s", first, strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[0], first) || !strings.HasPrefix(lines[0], "read secret db-password ") {
		t.Errorf("the pod's first read %q, want a read with the first token (%s)", lines[0], first)
	}
	by := time.Until(time.Unix(r.exp1, 0)) + 2*time.Minute + 30*time.Second
	if by > 0 {
		advanceCloudClock(t, env, admin, by)
	}
	t.Logf("the kubelet refreshed the token after %d reads (first token's exp %d); the cloud's clock moved %s", len(lines), r.exp1, by.Round(time.Second))
	n := len(r.logLines(t))

	// The first token, as the kubelet wrote it, is now refused.
	firstFile := filepath.Join(t.TempDir(), "first-token")
	if err := os.WriteFile(firstFile, []byte(r.first), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = wi.readSecretWithFile(r.pod, firstFile, env["AZURE_AUTHORITY_HOST"]) // the same Entra ID, on loopback
	wantAADSTS(t, err, "AADSTS700024")

	// The pod, with the token the kubelet refreshed, goes on: a read started after the advance
	// (the second line from then on) succeeds.
	err = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		lines = r.logLines(t)
		return len(lines) >= n+2, nil
	})
	if err != nil {
		t.Fatalf("the pod stopped reading: %v", err)
	}
	if l := lines[n+1]; !refreshed(l) {
		t.Errorf("a read after the first token expired on the cloud's clock: %q, want the secret read with the refreshed token", l)
	}
	secretReadLine(t, strings.Join(lines, "\n"), "db-password", secretValue)
	for _, l := range lines {
		if !strings.HasPrefix(l, "read secret db-password ") {
			t.Errorf("a read of the pod failed: %q", l)
		}
	}
}

// jwtExp reads the exp claim of a JWT without verifying it.
func jwtExp(t *testing.T, token string) int64 {
	t.Helper()
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		t.Fatal("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil || c.Exp == 0 {
		t.Fatalf("the token has no exp: %v", err)
	}
	return c.Exp
}
