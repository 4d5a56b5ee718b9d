package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// The sample of the HyperShift flow, which a user applies with the manager's principal id filled in.
const controlPlaneSample = "../../config/samples/control-plane-identities/hcp.yaml"

// controlPlaneOnTheNode is the control-plane flow of docs/control-plane-identities.md under
// `cerulean-local up` with the local node, as a user runs it (by TestWorkloadIdentityFromManifestsUnderUp
// while the kubelet's token refresh is awaited): the sample applied to a namespace of its own
// with the manager's principal id (the bootstrap principal's object id) filled in; the nodes'
// identity of the sample assigned to the node's scale set (the node's providerID), as a user
// assigns it with the CLI; the ControlPlaneIdentities Ready. A pod of the component (test-app
// hcp-token) mounts its SecretProviderClass through the real Secrets Store CSI Driver and up's
// provider (which reads the vault as the nodes' identity, from the scale set's endpoint) and,
// with pkg/hcpcredentials, authenticates from the mounted file as written, through DIR/pod.env's
// proxy: its token is the component identity's, from Azure's public authority.
func controlPlaneOnTheNode(t *testing.T, env, podEnv map[string]string, admin azcore.TokenCredential) {
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]
	cs := clientset(t, kubeconfig)
	const ns = "clusters-demo"
	kubectl(t, kubeconfig, "create", "namespace", ns)
	caConfigMap(t, cs, env, ns)

	// What the user fills in: the manager's principal id (under up, the bootstrap principal's).
	adminToken, err := admin.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
	if err != nil {
		t.Fatal(err)
	}
	sample, err := os.ReadFile(controlPlaneSample)
	if err != nil {
		t.Fatal(err)
	}
	const placeholder = "principalId: 00000000-0000-0000-0000-000000000000"
	if !strings.Contains(string(sample), placeholder) {
		t.Fatalf("the sample %s has no %q to fill in", controlPlaneSample, placeholder)
	}
	manifest := filepath.Join(t.TempDir(), "hcp.yaml")
	filled := strings.Replace(string(sample), placeholder, "principalId: "+claim(t, adminToken.Token, "oid"), 1)
	if err := os.WriteFile(manifest, []byte(filled), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, kubeconfig, "apply", "-n", ns, "-f", manifest)

	kubectl(t, kubeconfig, "wait", "-n", ns, "--for=condition=Ready", "--timeout=3m", "controlplaneidentities/hcp")
	var cpi cpv1.ControlPlaneIdentities
	if err := json.Unmarshal([]byte(kubectl(t, kubeconfig, "get", "-n", ns, "controlplaneidentities", "hcp", "-o", "json")), &cpi); err != nil {
		t.Fatal(err)
	}
	var cpo *cpv1.ComponentStatus
	for i := range cpi.Status.Components {
		if cpi.Status.Components[i].Name == cpv1.ComponentCPO {
			cpo = &cpi.Status.Components[i]
		}
	}
	cpoClientID := kubectl(t, kubeconfig, "get", "-n", ns, "userassignedidentity", "hcp-cpo", "-o", "jsonpath={.status.clientId}")
	if cpo == nil || cpo.SecretProviderClass == "" || cpo.SecretName == "" || cpoClientID == "" || cpo.ClientID != cpoClientID {
		t.Fatalf("the cpo component's status %+v, want its class, secret and the client id of hcp-cpo (%q)", cpo, cpoClientID)
	}

	// Before the nodes' identity is on the node's scale set, up's provider refuses the class's
	// mount (as the driver sends it): the scale set's endpoint does not know the identity.
	var params map[string]string
	if err := json.Unmarshal([]byte(kubectl(t, kubeconfig, "get", "-n", ns, "secretproviderclass", cpo.SecretProviderClass, "-o", "jsonpath={.spec.parameters}")), &params); err != nil {
		t.Fatal(err)
	}
	params["csi.storage.k8s.io/pod.name"], params["csi.storage.k8s.io/pod.namespace"] = "control-plane-operator", ns
	target := t.TempDir()
	attrib, _ := json.Marshal(params)
	_, err = providerClient(t, env).Mount(ctx, &v1alpha1.MountRequest{Attributes: string(attrib), Secrets: "{}", TargetPath: target, Permission: "420"})
	if st, _ := status.FromError(err); st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), "Identity not found") {
		t.Errorf("a mount as the nodes' identity before it is on the scale set: %v, want Unauthenticated, Identity not found", err)
	}
	if files, _ := os.ReadDir(target); len(files) != 0 {
		t.Errorf("a refused mount wrote %d files", len(files))
	}

	// The nodes' identity on the node's scale set (`az vmss identity assign`: a PATCH of the
	// scale set's identity).
	kubectl(t, kubeconfig, "wait", "-n", ns, "--for=condition=Ready", "--timeout=3m", "userassignedidentity/hcp-nodes")
	nodesID := kubectl(t, kubeconfig, "get", "-n", ns, "userassignedidentity", "hcp-nodes", "-o", "jsonpath={.status.id}")
	providerID := kubectl(t, kubeconfig, "get", "nodes", "-o", "jsonpath={.items[0].spec.providerID}")
	scaleSet, ok := strings.CutPrefix(providerID, "azure://")
	if i := strings.LastIndex(scaleSet, "/virtualMachines/"); ok && i > 0 {
		scaleSet = scaleSet[:i]
	} else {
		t.Fatalf("the node's providerID %q names no scale set instance", providerID)
	}
	rg, name := resourceGroupAndName(t, scaleSet)
	sets, err := armcompute.NewVirtualMachineScaleSetsClient(env["AZURE_SUBSCRIPTION_ID"], admin, &arm.ClientOptions{ClientOptions: clientOptions(t, env)})
	if err != nil {
		t.Fatal(err)
	}
	poller, err := sets.BeginUpdate(ctx, rg, name, armcompute.VirtualMachineScaleSetUpdate{Identity: &armcompute.VirtualMachineScaleSetIdentity{
		Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned), UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{nodesID: {}},
	}}, nil)
	if err != nil {
		t.Fatalf("assign the nodes' identity to scale set %s: %v", scaleSet, err)
	}
	if _, err := poller.PollUntilDone(ctx, nil); err != nil {
		t.Fatalf("assign the nodes' identity to scale set %s: %v", scaleSet, err)
	}

	// The component's pod, as docs/control-plane-identities.md shows it: the class at /mnt/certs,
	// DIR/pod.env's proxy and the cloud's CA; no authority of the cloud's.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "control-plane-operator"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "cpo", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"hcp-token", "https://vault.azure.net/.default", "1h"},
				Env: []corev1.EnvVar{
					{Name: hcpcredentials.EnvPath, Value: "/mnt/certs/" + cpo.SecretName},
					{Name: "HTTPS_PROXY", Value: podEnv["HTTPS_PROXY"]},
					{Name: "NO_PROXY", Value: podEnv["NO_PROXY"]},
					{Name: "SSL_CERT_FILE", Value: "/etc/cloud-ca/ca.crt"},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "certs", MountPath: "/mnt/certs", ReadOnly: true},
					{Name: "cloud-ca", MountPath: "/etc/cloud-ca", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "certs", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
					Driver: devenv.SecretsStoreDriverName, ReadOnly: ptr.To(true),
					VolumeAttributes: map[string]string{"secretProviderClass": cpo.SecretProviderClass},
				}}},
				{Name: "cloud-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-ca"},
				}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the component's pod: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	var line string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		line, _, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
		return strings.HasPrefix(line, "hcp-token "), nil
	})
	if err != nil {
		events := kubectl(t, kubeconfig, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+pod.Name)
		t.Fatalf("the component's pod printed no token line (%v); its events:\n%s", err, events)
	}
	t.Logf("the component's pod: %s", line)
	want := "hcp-token ok appid " + cpoClientID + " authority https://login.microsoftonline.com/ not_before "
	if !strings.HasPrefix(line, want) {
		t.Errorf("the component's pod printed %q, want a token of hcp-cpo (%s) from Azure's public authority", line, cpoClientID)
	}
}
