package devenv_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// offsetClock is real time plus an offset the test moves.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// The HyperShift flow ends in a real pod: a ControlPlaneIdentities object is applied, the
// manager writes the component's credentials into Key Vault and its SecretProviderClass; a pod
// of the component (test-app hcp-token) mounts that class through the real Secrets Store CSI
// Driver and `cerulean csi-provider` (reading the vault as the nodes' identity, through the
// scale set's IMDS), and with pkg/hcpcredentials authenticates from the mounted file as written
// (no authority setting: the file names Azure's public authority, which the pod reaches through
// the cloud's proxy, as it would reach Azure's), getting tokens as the component's identity.
// Then a renewal comes due (the manager's clock past renew_after, the cloud's on by as much:
// time passing, as in reality), the manager writes a new certificate, the driver's rotation
// rewrites the file in the running pod, and the pod's next token comes from the new
// credentials: no failed request, no restart.
func TestControlPlaneComponentPodAuthenticatesAcrossARenewal(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	node := devenvtest.Node(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(cp.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.InstallCRDs(ctx, cp.RESTConfig); err != nil {
		t.Fatal(err)
	}

	// The cloud, its clock moving with real time (and ahead when the test says), its proxy for
	// Azure's public names served on the node's address for pods.
	cloudClock := &offsetClock{}
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM(), Clock: cloudClock.Now, ProxyAddr: "0"})
	s := c.Settings()
	proxyURL, err := c.ServeProxyOn(net.JoinHostPort(node.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	owner := cloudtest.OwnerCred(t, c)
	armOpts := cloudtest.ARMOptions(c)
	const rg, ns = "rg-hcp-node", "clusters-hcp"
	cloudtest.CreateGroup(t, c, owner, armOpts, "eastus", rg)
	vault := cloudtest.CreateRBACVault(t, c, owner, armOpts, "eastus", rg, "kv-hcp-node")
	identities, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	cpo, err := identities.CreateOrUpdate(ctx, rg, "id-cpo", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := identities.CreateOrUpdate(ctx, rg, "id-nodes", armmsi.Identity{Location: to.Ptr("eastus")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := armauthorization.NewRoleAssignmentsClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	// The nodes read the credentials secrets; the manager (the cloud's bootstrap principal) writes them.
	for role, principal := range map[string]string{roleKeyVaultSecretsOfficer: s.ObjectID, roleKeyVaultSecretsUser: *nodes.Properties.PrincipalID} {
		if _, err := roles.Create(ctx, *vault.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principal), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		}}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// The provider as it runs on a node of a scale set carrying the nodes' identity (its IMDS
	// environment), its cache short so that a rotation is seen at the driver's next poll.
	vmss, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	vmssPoller, err := vmss.BeginCreateOrUpdate(ctx, rg, "nodes", armcompute.VirtualMachineScaleSet{Location: to.Ptr("eastus"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*nodes.ID: {}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	scaleSet, err := vmssPoller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vars, err := msi.ComputeEnv(s.DataDir, *scaleSet.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range vars {
		t.Setenv(kv[0], kv[1])
	}
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
	t.Cleanup(func() {
		// The driver unmounts the pod's volume: it stops once the pod is gone.
		bg := context.Background()
		_ = cs.CoreV1().Pods(ns).Delete(bg, "control-plane-operator", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		_ = wait.PollUntilContextTimeout(bg, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
		if err := driver.Stop(); err != nil {
			t.Errorf("stop driver: %v", err)
		}
	})

	// The manager, its clock injected (renewals are decided by it).
	clock := &offsetClock{}
	startManagerForCPI(t, cp, c, clock.Now, ns)

	// The user's objects: the namespace, the component's service account, the cloud's CA (what
	// the pod trusts for the proxy's Azure names) and the ControlPlaneIdentities.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "control-plane-operator"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cloud-ca"},
		Data: map[string]string{"ca.crt": string(ca)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.Create(ctx, &cpv1.ControlPlaneIdentities{
		ObjectMeta: metav1.ObjectMeta{Name: "hcp", Namespace: ns},
		Spec: cpv1.ControlPlaneIdentitiesSpec{
			KeyVault:    cpv1.ResourceReference{ARMID: *vault.ID},
			VaultReader: cpv1.ReaderReference{ARMID: *nodes.ID},
			Components:  []cpv1.Component{{Name: cpv1.ComponentCPO, Identity: cpv1.ResourceReference{ARMID: *cpo.ID}}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	first := waitCPO(t, kc, ns, "the component's credentials written", func(st cpv1.ComponentStatus) bool { return st.SecretVersion != "" })
	if first.SecretProviderClass == "" || first.SecretName == "" || first.RenewAfter == nil || first.NotBefore == nil {
		t.Fatalf("component status %+v", first)
	}

	// The component's pod: the class mounted at /mnt/certs, a token every 2 s, and what any pod
	// on the node has to reach Azure's names (DIR/pod.env's proxy and NO_PROXY, the CA): no
	// authority or endpoint of the cloud's.
	pod := testPod("control-plane-operator", "hcp-token", "https://vault.azure.net/.default", "2s")
	pod.Namespace = ns
	pod.Spec.ServiceAccountName = "control-plane-operator"
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: hcpcredentials.EnvPath, Value: "/mnt/certs/" + first.SecretName},
		{Name: "SSL_CERT_FILE", Value: "/etc/cloud-ca/ca.crt"},
		{Name: "HTTPS_PROXY", Value: proxyURL},
		{Name: "NO_PROXY", Value: devenv.ServiceCIDR + "," + devenv.NodePodCIDR + ",.svc,.cluster.local"},
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "certs", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver: devenv.SecretsStoreDriverName, ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": first.SecretProviderClass},
		}}},
		{Name: "cloud-ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-ca"}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "certs", MountPath: "/mnt/certs", ReadOnly: true},
		{Name: "cloud-ca", MountPath: "/etc/cloud-ca", ReadOnly: true},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the component's pod: %v", err)
	}
	waitPhase(t, cs, ns, pod.Name, corev1.PodRunning)

	logs := func() []string {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return nil
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	// waitToken waits for a successful token of the component's identity from credentials whose
	// not_before is (to the second, as the status has it) want, at the authority the file names:
	// Azure's public one, the pod setting none.
	waitToken := func(what string, want time.Time) {
		t.Helper()
		line := "hcp-token ok appid " + *cpo.Properties.ClientID + " authority https://login.microsoftonline.com/ not_before "
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			for _, l := range logs() {
				if nb, ok := strings.CutPrefix(l, line); ok {
					if got, err := time.Parse(time.RFC3339Nano, nb); err == nil && got.Truncate(time.Second).Equal(want.Truncate(time.Second)) {
						return true, nil
					}
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("%s: the pod printed no token of the cpo identity (%s) from the credentials of not_before %s; its log:\n%s",
				what, *cpo.Properties.ClientID, want.UTC().Format(time.RFC3339), strings.Join(logs(), "\n"))
		}
	}
	waitToken("first credentials", first.NotBefore.Time)

	// The renewal comes due: the manager's clock past renew_after, the cloud's two minutes on
	// (so that the new certificate's not_before is later).
	cloudClock.Advance(2 * time.Minute)
	clock.Advance(first.RenewAfter.Sub(clock.Now()) + 10*time.Second)
	renewed := waitCPO(t, kc, ns, "renewed credentials", func(st cpv1.ComponentStatus) bool {
		return st.SecretVersion != first.SecretVersion
	})
	if !renewed.NotBefore.After(first.NotBefore.Time) {
		t.Fatalf("renewed not_before %v, first %v", renewed.NotBefore, first.NotBefore)
	}
	waitToken("after the renewal and the driver's rotation", renewed.NotBefore.Time)

	// Without a restart, and no request failed.
	got, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("the component's pod is %s, container statuses %+v: want it running, never restarted", got.Status.Phase, got.Status.ContainerStatuses)
	}
	lines := logs()
	t.Logf("the component's pod:\n%s", strings.Join(lines, "\n"))
	for _, l := range lines {
		if !strings.HasPrefix(l, "hcp-token ok ") {
			t.Errorf("the component's pod printed %q: no request may fail across a rotation", l)
		}
	}
}

// waitCPO waits until the cpo component is Ready and cond holds for its status.
func waitCPO(t *testing.T, kc client.Client, ns, what string, cond func(cpv1.ComponentStatus) bool) cpv1.ComponentStatus {
	t.Helper()
	var st cpv1.ComponentStatus
	why := "no status yet"
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		o := &cpv1.ControlPlaneIdentities{}
		if err := kc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hcp"}, o); err != nil {
			why = err.Error()
			return false, nil
		}
		for _, c := range o.Status.Components {
			if c.Name != cpv1.ComponentCPO {
				continue
			}
			st = c
			rc := meta.FindStatusCondition(c.Conditions, cpv1.ConditionReady)
			if rc == nil {
				return false, nil
			}
			why = rc.Reason + ": " + rc.Message
			return rc.Status == metav1.ConditionTrue && cond(c), nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, why)
	}
	return st
}

// startManagerForCPI runs the manager in-process for namespace ns, with an injected clock and a
// short resync. Its cleanup deletes the ControlPlaneIdentities (finalizers) before it stops.
func startManagerForCPI(t *testing.T, cp *devenv.ControlPlane, c *cloud.Cloud, clock func() time.Time, ns string) {
	t.Helper()
	s := c.Settings()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	go func() {
		done <- manager.Run(ctx, manager.Options{
			REST: cp.RESTConfig, Azure: azure.Config{
				TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
				AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
				ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
			},
			SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond,
			TargetNamespaces: []string{ns}, MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true, PodIdentity: "off",
			Clock: clock, ControlPlaneResync: 300 * time.Millisecond,
			Logger: logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler()),
		})
	}()
	t.Cleanup(func() {
		bg, stop := context.WithTimeout(context.Background(), time.Minute)
		defer stop()
		kc, err := client.New(cp.RESTConfig, client.Options{Scheme: mustScheme(t)})
		if err == nil {
			_ = kc.DeleteAllOf(bg, &cpv1.ControlPlaneIdentities{}, client.InNamespace(ns))
			_ = wait.PollUntilContextCancel(bg, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				var list cpv1.ControlPlaneIdentitiesList
				return kc.List(ctx, &list, client.InNamespace(ns)) == nil && len(list.Items) == 0, nil
			})
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			l := logs.String()
			if len(l) > 8000 {
				l = l[len(l)-8000:]
			}
			t.Logf("manager log (end):\n%s", l)
		}
	})
}

func mustScheme(t *testing.T) *k8sruntime.Scheme {
	t.Helper()
	scheme, err := manager.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return scheme
}
