package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

// TestProxySidecarAnswersIMDSWithTheWorkloadIdentity: `cerulean-local up` with the local node
// gives its webhook upstream's proxy images (built by `make images` from the pinned module), so
// an app without workload identity support, whose pod asks for the proxy sidecar, gets the
// workload identity's token from IMDS: upstream's proxy-init redirects the pod's
// 169.254.169.254:80 to the sidecar, which exchanges the pod's projected token at Entra ID (the
// local cloud under login.microsoftonline.com, with the app's CA and authority host). The
// token's oid is the identity's principal, created here through ARM with its federated credential.
func TestProxySidecarAnswersIMDSWithTheWorkloadIdentity(t *testing.T) {
	if !hasNode(t) {
		return
	}
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]
	const ns, sa, rg = "proxied", "app", "proxied-rg"

	// The identity and its federated credential for system:serviceaccount:proxied:app.
	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	sub := env["AZURE_SUBSCRIPTION_ID"]
	groups, err := armresources.NewResourceGroupsClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.CreateOrUpdate(ctx, rg, armresources.ResourceGroup{Location: to.Ptr("local")}, nil); err != nil {
		t.Fatalf("create resource group: %v", err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ids.CreateOrUpdate(ctx, rg, "proxied-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatalf("create identity: %v", err)
	}
	clientID, principalID := *id.Properties.ClientID, *id.Properties.PrincipalID
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fics.CreateOrUpdate(ctx, rg, "proxied-app", "proxied-app", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer: to.Ptr(env["CERULEAN_OIDC_ISSUER"]), Subject: to.Ptr("system:serviceaccount:" + ns + ":" + sa),
			Audiences: []*string{to.Ptr(workloadidentity.DefaultAudience)},
		},
	}, nil); err != nil {
		t.Fatalf("create federated credential: %v", err)
	}

	cs := clientset(t, kubeconfig)
	kubectl(t, kubeconfig, "create", "namespace", ns)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: sa, Annotations: map[string]string{workloadidentity.ClientIDAnnotation: clientID},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caConfigMap(t, cs, env, ns)
	waitWebhook(t, kubeconfig, ns)

	// The app asks IMDS with the SDK's ManagedIdentityCredential, as an app written for a VM
	// does. It reaches Azure's names as pods here do (the cloud's CA, the public authority
	// host); the sidecar takes both from it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "imds-app",
			Labels:      map[string]string{workloadidentity.UseLabel: "true"},
			Annotations: map[string]string{workloadidentity.InjectProxyAnnotation: "true"},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"imds-token", "https://vault.azure.net/.default"},
				Env: []corev1.EnvVar{
					{Name: "SSL_CERT_FILE", Value: "/etc/cloud-ca/ca.crt"},
					{Name: workloadidentity.AuthorityHostEnv, Value: workloadidentity.DefaultAuthorityHost},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "cloud-ca", MountPath: "/etc/cloud-ca", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "cloud-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-ca"},
			}}}},
		},
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range []string{workloadidentity.ProxyInitContainerName, workloadidentity.ProxySidecarContainerName} {
				out := kubectlQuiet(t, kubeconfig, "logs", "-n", ns, "imds-app", "-c", c)
				t.Logf("container %s:\n%s", c, out)
			}
			out := kubectlQuiet(t, kubeconfig, "get", "-n", ns, "pod", "imds-app", "-o", "yaml")
			t.Logf("pod:\n%s", out)
		}
	})
	logs := runToCompletion(t, cs, kubeconfig, pod)
	if want := "oid " + principalID; !strings.Contains(logs, want) {
		t.Errorf("the app's IMDS token: %q, want the workload identity's %q", logs, want)
	}

	got, err := cs.CoreV1().Pods(ns).Get(ctx, "imds-app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got.Spec.InitContainers {
		names = append(names, c.Name+"="+c.Image)
	}
	if want := fmt.Sprintf("[%s=%s %s=%s]", workloadidentity.ProxySidecarContainerName, images.AzwiProxy,
		workloadidentity.ProxyInitContainerName, images.AzwiProxyInit); fmt.Sprint(names) != want {
		t.Errorf("init containers %v, want %s", names, want)
	}
	// The sidecar answered on its port inside the pod: upstream's proxy logs each token it got.
	if out := kubectlQuiet(t, kubeconfig, "logs", "-n", ns, "imds-app", "-c", workloadidentity.ProxySidecarContainerName); !strings.Contains(out, "successfully acquired token") {
		t.Errorf("the sidecar's log does not show the token it got:\n%s", out)
	}
}
