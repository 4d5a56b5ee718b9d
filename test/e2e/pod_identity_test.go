package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cerulean/cerulean/internal/images"
)

// podIdentityOnTheNode is pod identity on the whole system, in an up with the local node (run
// by TestWorkloadIdentityFromManifestsUnderUp while the kubelet's token refresh is awaited): the
// node agent runs for the node; a managed identity (a manifest, with Key Vault Secrets User on
// the vault) is bound to a label through aad-pod-identity's objects; a real pod of the test-app
// image (pod network, not the host's) with that label reads the Key Vault secret with the
// Azure SDK's DefaultAzureCredential: its token from 169.254.169.254, which the node agent's
// DNAT rule sends to the agent, which asks the local cloud's IMDS-style endpoint of the node's
// scale set; Key Vault under its public name through the cloud's proxy for pods. A service
// principal's binding (type 1, its client secret in a Secret) works the same way. A pod without
// the label gets a 403.
func podIdentityOnTheNode(t *testing.T, env, podEnv map[string]string, ns, vaultName string) {
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]
	cs := clientset(t, kubeconfig)
	if out := kubectl(t, kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].status.addresses[0].address}"); out == "" {
		t.Fatal("the node has no address")
	}
	apply(t, kubeconfig, `apiVersion: managedidentity.azure.com/v1api20230131
kind: UserAssignedIdentity
metadata: {name: pi-app, namespace: `+ns+`}
spec:
  location: local
  owner: {name: wi-shop}
  operatorSpec:
    configMaps:
      clientId: {name: pi-identity, key: clientId}
      principalId: {name: pi-identity, key: principalId}
---
apiVersion: authorization.azure.com/v1api20220401
kind: RoleAssignment
metadata: {name: pi-app-secrets-user, namespace: `+ns+`}
spec:
  owner: {name: shop-vault, group: keyvault.azure.com, kind: Vault}
  principalIdFromConfig: {name: pi-identity, key: principalId}
  principalType: ServicePrincipal
  roleDefinitionReference: {wellKnownName: Key Vault Secrets User}
`)
	kubectl(t, kubeconfig, "wait", "-n", ns, "--for=condition=Ready", "--timeout=3m", "userassignedidentity/pi-app", "roleassignment/pi-app-secrets-user")
	clientID := kubectl(t, kubeconfig, "get", "-n", ns, "configmap", "pi-identity", "-o", "jsonpath={.data.clientId}")
	resourceID := kubectl(t, kubeconfig, "get", "-n", ns, "userassignedidentity", "pi-app", "-o", "jsonpath={.status.id}")

	// The user's objects, as written for aad-pod-identity.
	apply(t, kubeconfig, `apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentity
metadata:
  name: pi-app
  namespace: `+ns+`
spec:
  type: 0
  resourceID: `+resourceID+`
  clientID: `+clientID+`
---
apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentityBinding
metadata:
  name: pi-app-binding
  namespace: `+ns+`
spec:
  azureIdentity: pi-app
  selector: pi-app
`)

	// Issue 22 probe 2: a namespace granted nothing cannot name this identity; the manager's
	// admission check refuses it, naming the grant to add.
	thief := ns + "-thief"
	kubectl(t, kubeconfig, "create", "namespace", thief)
	t.Cleanup(func() {
		_ = exec.Command(binary(t, "kubectl"), "--kubeconfig", kubeconfig, "delete", "namespace", thief, "--wait=false").Run()
	})
	cmd := exec.CommandContext(ctx, binary(t, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(`apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentity
metadata: {name: stolen, namespace: ` + thief + `}
spec: {type: 0, resourceID: "` + resourceID + `", clientID: "` + clientID + `"}
`)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "NamespaceGrant") || !strings.Contains(string(out), resourceID) {
		t.Errorf("an ungranted namespace's AzureIdentity naming pi-app: %v\n%s", err, out)
	}

	app := appPod(ns, "pi-app", vaultName, "db-password", podEnv)
	app.Labels = map[string]string{"aadpodidbinding": "pi-app"}
	secretReadLine(t, runToCompletion(t, cs, kubeconfig, app), "db-password", secretValue)
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "pi-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.HostNetwork || got.Status.PodIP == "" || got.Status.PodIP == got.Status.HostIP {
		t.Errorf("the pod ran on the host's network (podIP %s, hostIP %s), not the pod network", got.Status.PodIP, got.Status.HostIP)
	}

	// A service principal (type 1) bound the same way: the agent gets its token from Entra ID
	// with the client secret of the identity's Secret (the bootstrap principal's here: it holds
	// Key Vault Secrets Officer on the vault).
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pi-sp"}, StringData: map[string]string{"clientSecret": env["AZURE_CLIENT_SECRET"]},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply(t, kubeconfig, `apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentity
metadata: {name: pi-sp, namespace: `+ns+`}
spec:
  type: 1
  tenantID: `+env["AZURE_TENANT_ID"]+`
  clientID: `+env["AZURE_CLIENT_ID"]+`
  clientPassword: {name: pi-sp, namespace: `+ns+`}
---
apiVersion: aadpodidentity.k8s.io/v1
kind: AzureIdentityBinding
metadata: {name: pi-sp-binding, namespace: `+ns+`}
spec:
  azureIdentity: pi-sp
  selector: pi-sp
`)
	spApp := appPod(ns, "pi-sp-app", vaultName, "db-password", podEnv)
	spApp.Labels = map[string]string{"aadpodidbinding": "pi-sp"}
	secretReadLine(t, runToCompletion(t, cs, kubeconfig, spApp), "db-password", secretValue)

	// The agent records the issuance on the binding (its audit Events are flushed every 5 s).
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=pi-app-binding,reason=TokenIssued"})
		return err == nil && len(evs.Items) > 0, nil
	})
	if err != nil {
		t.Errorf("no TokenIssued Event on the binding: %v", err)
	}

	// A pod no binding selects gets no token.
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "no-binding"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"imds-token", "https://vault.azure.net/.default"},
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failed *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		failed, err = cs.CoreV1().Pods(ns).Get(ctx, "no-binding", metav1.GetOptions{})
		return err == nil && (failed.Status.Phase == corev1.PodSucceeded || failed.Status.Phase == corev1.PodFailed), nil
	})
	if err != nil || failed.Status.Phase != corev1.PodFailed {
		t.Errorf("a pod without a binding: phase %v (%v), want Failed", failed.Status.Phase, err)
	} else if out := kubectl(t, kubeconfig, "logs", "-n", ns, "no-binding"); !strings.Contains(out, "403") || strings.Contains(out, "imds token") {
		t.Errorf("a pod without a binding: %q, want a 403 from the agent", out)
	}
}
