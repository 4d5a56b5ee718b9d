package devenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

const (
	roleKeyVaultSecretsUser    = "4633458b-17de-408a-b874-0445c86b69e6"
	roleKeyVaultSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
)

var (
	spcGVR   = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
	spcpsGVR = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}
)

// The whole path a user's pod takes for a Key Vault secret as a file, all of it real: the kubelet
// calls the upstream Secrets Store CSI Driver (registered through our registrar), the driver calls
// `cerulean csi-provider` on its socket with the pod's service-account token (the CSIDriver's
// tokenRequests), the provider exchanges it at the local cloud's Entra ID for the SecretProviderClass's
// clientID (a managed identity federated with this cluster's issuer) and reads Key Vault. Then the
// secret rotates in Key Vault and the driver's rotation rewrites the file in the running pod; and
// a class naming a missing secret fails its pod's mount with an event naming the secret.
func TestSecretsStoreDriverMountsKeyVaultSecretsIntoAPod(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	node := devenvtest.Node(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig)

	// The cloud: a vault in RBAC mode, a managed identity that may read its secrets, federated
	// with the cluster's issuer for namespace/app.
	const ns, sa, rg = "secrets-csi", "app", "rg-csi"
	c := cloudtest.Start(t, cloud.Options{TrustCAs: [][]byte{cp.CACertPEM}, ARM: cloudtest.FastARM()})
	s := c.Settings()
	owner := cloudtest.OwnerCred(t, c)
	armOpts := cloudtest.ARMOptions(c)
	cloudtest.CreateGroup(t, c, owner, armOpts, "eastus", rg)
	vault := cloudtest.CreateRBACVault(t, c, owner, armOpts, "eastus", rg, "kv-node")
	identities, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := identities.CreateOrUpdate(ctx, rg, "id-app", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	federated, err := armmsi.NewFederatedIdentityCredentialsClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := federated.CreateOrUpdate(ctx, rg, "id-app", "kube", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer: to.Ptr(cp.IssuerURL), Subject: to.Ptr("system:serviceaccount:" + ns + ":" + sa),
			Audiences: []*string{to.Ptr(devenv.TokenExchangeAudience)},
		}}, nil); err != nil {
		t.Fatal(err)
	}
	roles, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	for role, principal := range map[string]string{roleKeyVaultSecretsOfficer: s.ObjectID, roleKeyVaultSecretsUser: *mi.Properties.PrincipalID} {
		if _, err := roles.Create(ctx, *vault.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principal), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	secrets, err := azsecrets.NewClient(*vault.Properties.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	setSecret := func(value string) {
		t.Helper()
		if _, err := secrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(value)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	first := "first-" + uuid.NewString()
	setSecret(first)

	// The provider on its socket (a short directory: unix socket paths are limited), its cache
	// bound short so that a rotation is seen at the driver's next poll.
	providers, err := os.MkdirTemp("", "csip")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(providers) })
	p, err := csiprovider.New(csiprovider.Options{
		Azure:     azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: s.URL + cloud.VaultLookupPath, CacheTTL: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := csiprovider.Listen(p, filepath.Join(providers, "azure.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	driver, err := node.StartSecretsStoreDriver(ctx, devenv.SecretsStoreOptions{ProvidersDir: providers, RotationInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var pods []string
	t.Cleanup(func() {
		// The driver unmounts the pods' volumes: it stops once they are gone.
		bg := context.Background()
		for _, name := range pods {
			_ = cs.CoreV1().Pods(ns).Delete(bg, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		_ = wait.PollUntilContextTimeout(bg, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
		if err := driver.Stop(); err != nil {
			t.Errorf("stop driver: %v", err)
		}
	})

	// The user's objects, as the upstream provider's docs write them.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	class := func(name, object string) {
		t.Helper()
		spc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClass",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"provider": "azure", "parameters": map[string]any{
				"keyvaultName": "kv-node", "clientID": *mi.Properties.ClientID, "tenantId": s.TenantID,
				"objects": "array:\n  - |\n    objectName: " + object + "\n    objectType: secret\n",
			}},
		}}
		if _, err := dyn.Resource(spcGVR).Namespace(ns).Create(ctx, spc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create SecretProviderClass %s: %v", name, err)
		}
	}
	class("app-secrets", "db-password")
	class("missing-secret", "no-such-secret")
	pod := func(name, class string) {
		t.Helper()
		p := testPod(name, "sleep")
		p.Namespace = ns
		p.Spec.ServiceAccountName = sa
		p.Spec.Volumes = []corev1.Volume{{Name: "secrets", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: devenv.SecretsStoreDriverName, ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": class},
		}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "secrets", MountPath: "/mnt/secrets", ReadOnly: true}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
		pods = append(pods, name)
	}
	pod("app", "app-secrets")
	pod("broken", "missing-secret")

	waitPhase(t, cs, ns, "app", corev1.PodRunning)
	read := func() string {
		return kubectl(t, cp, "-n", ns, "exec", "app", "--", "/usr/local/bin/test-app", "cat", "/mnt/secrets/db-password")
	}
	if got := read(); got != first {
		t.Fatalf("the pod read %q from the mounted file, want the secret's value", got)
	}
	// The driver records the mount in its own CRD, as on a cluster.
	statuses, err := dyn.Resource(spcpsGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses.Items) != 1 {
		t.Fatalf("%d SecretProviderClassPodStatus objects, want the app pod's", len(statuses.Items))
	}
	if mounted, _, _ := unstructured.NestedBool(statuses.Items[0].Object, "status", "mounted"); !mounted {
		t.Fatalf("SecretProviderClassPodStatus %s not mounted: %v", statuses.Items[0].GetName(), statuses.Items[0].Object["status"])
	}

	t.Run("rotation reaches the running pod", func(t *testing.T) {
		second := "second-" + uuid.NewString()
		setSecret(second)
		got := ""
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			got = read()
			return got == second, nil
		}); err != nil {
			t.Fatalf("after a rotation in Key Vault the pod still reads %q (the driver's rotation polls every 2s): %v", got, err)
		}
	})

	t.Run("a missing secret fails the mount, named in the pod's events", func(t *testing.T) {
		var msg string
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=broken"})
			if err != nil {
				return false, nil //nolint:nilerr // retried until the timeout
			}
			for _, ev := range evs.Items {
				if ev.Reason == "FailedMount" {
					msg = ev.Message
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("no FailedMount event for the pod whose class names a missing secret: %v", err)
		}
		if !strings.Contains(msg, "no-such-secret") {
			t.Fatalf("FailedMount event does not name the missing secret: %s", msg)
		}
		if strings.Contains(msg, first) {
			t.Fatal("FailedMount event carries a secret's value")
		}
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "broken", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != corev1.PodPending {
			t.Fatalf("pod with a failed mount is %s, want Pending (no container starts without its files)", got.Status.Phase)
		}
	})
}
