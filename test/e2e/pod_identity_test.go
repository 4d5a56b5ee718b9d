package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/nodeagent"
)

// Pod identity on the whole system: as root, `up` runs the node agent for its node; a real pod
// of the test-app image (pod network, not the host's), labelled with a binding's selector, gets
// a token of the bound identity from 169.254.169.254 through the Azure SDK's
// ManagedIdentityCredential: iptables sends it to the agent, which asks the local cloud's
// IMDS-style endpoint of the node's scale set. A pod without the label gets none. The local
// cloud listens on loopback, which the pod network cannot reach, so the pod shows the token's
// claims instead of reading a Key Vault secret with it.
func TestPodIdentityOnTheLocalNode(t *testing.T) {
	if !hasNode(t) {
		t.Skip("pod identity's node agent runs only with the local node (root)")
	}
	dir := t.TempDir()
	up := startUp(t, dir)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "logs", "node-agent.log"))
			t.Logf("the node agent's log:\n%s", b)
		}
	})
	env := waitForEnv(t, up, dir)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]
	if !strings.Contains(up.output.String(), "node agent          10.244.0.1:") {
		t.Errorf("up's summary does not show the node agent on the node's address:\n%s", up.output)
	}

	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	identities, err := armmsi.NewUserAssignedIdentitiesClient(env["AZURE_SUBSCRIPTION_ID"], admin, &arm.ClientOptions{ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	rg, _ := resourceGroupAndName(t, env["CERULEAN_CLUSTER_ID"])
	mi, err := identities.CreateOrUpdate(ctx, rg, "pi-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatalf("create identity: %v", err)
	}

	// The user's objects, as written for aad-pod-identity.
	manifest := `apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentity
metadata:
  name: pi-app
  namespace: default
spec:
  type: 0
  resourceID: ` + *mi.ID + `
  clientID: ` + *mi.Properties.ClientID + `
---
apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentityBinding
metadata:
  name: pi-app-binding
  namespace: default
spec:
  azureIdentity: pi-app
  selector: pi-app
`
	apply := exec.CommandContext(ctx, binary(t, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}

	cs := clientset(t, kubeconfig)
	tokenPod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"imds-token", armScope(env)},
			}}},
		}
	}
	logs := runToCompletion(t, cs, kubeconfig, tokenPod("pi-app", map[string]string{"aadpodidbinding": "pi-app"}))
	if want := "imds token xms_mirid " + *mi.ID + " oid " + *mi.Properties.PrincipalID; !strings.Contains(strings.ToLower(logs), strings.ToLower(want)) {
		t.Errorf("the labelled pod's token: %q, want %q", logs, want)
	}
	got, err := cs.CoreV1().Pods("default").Get(ctx, "pi-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.HostNetwork || got.Status.PodIP == "" || got.Status.PodIP == got.Status.HostIP {
		t.Errorf("the pod ran on the host's network (podIP %s, hostIP %s), not the pod network", got.Status.PodIP, got.Status.HostIP)
	}

	// The agent records the issuance on the binding (its audit Events are flushed every 5 s).
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pi-app-binding,reason=TokenIssued"})
		return err == nil && len(evs.Items) > 0, nil
	})
	if err != nil {
		t.Errorf("no TokenIssued Event on the binding: %v", err)
	}

	// A pod no binding selects gets no token.
	_, err = cs.CoreV1().Pods("default").Create(ctx, tokenPod("no-binding", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failed *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		failed, err = cs.CoreV1().Pods("default").Get(ctx, "no-binding", metav1.GetOptions{})
		return err == nil && (failed.Status.Phase == corev1.PodSucceeded || failed.Status.Phase == corev1.PodFailed), nil
	})
	if err != nil || failed.Status.Phase != corev1.PodFailed {
		t.Errorf("a pod without a binding: phase %v (%v), want Failed", failed.Status.Phase, err)
	} else if out := kubectl(t, kubeconfig, "logs", "no-binding"); !strings.Contains(out, "403") || strings.Contains(out, "imds token") {
		t.Errorf("a pod without a binding: %q, want a 403 from the agent", out)
	}

	stopAndCheck(t, up, dir, syscall.SIGINT)
	if out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", nodeagent.DefaultChain).CombinedOutput(); err == nil {
		t.Errorf("the node agent's chain is left after up stopped:\n%s", out)
	}
}

// removeAgentChain removes the node agent's chain that an up killed with SIGKILL leaves (the
// next up's agent would clear it; a test leaves nothing behind).
func removeAgentChain() {
	if exec.Command("iptables", "-w", "5", "-t", "nat", "-S", nodeagent.DefaultChain).Run() != nil {
		return
	}
	_ = exec.Command("iptables", "-w", "5", "-t", "nat", "-D", "PREROUTING", "-j", nodeagent.DefaultChain, "-m", "comment", "--comment", "cerulean node agent").Run()
	_ = exec.Command("iptables", "-w", "5", "-t", "nat", "-F", nodeagent.DefaultChain).Run()
	_ = exec.Command("iptables", "-w", "5", "-t", "nat", "-X", nodeagent.DefaultChain).Run()
}
