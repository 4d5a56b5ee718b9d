package manager_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	secretsstorev1 "sigs.k8s.io/secrets-store-csi-driver/apis/v1"
	"sigs.k8s.io/secrets-store-csi-driver/pkg/util/fileutil"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	cpv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/csiprovider/csiprovidertest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/manifests"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

var spcCRDOnce sync.Once

// installSPCCRD installs the Secrets Store CSI Driver's SecretProviderClass CRD, from the
// driver's own Go module (a dependency of this one), as the driver's chart does.
func installSPCCRD(t *testing.T, c client.Client) {
	t.Helper()
	spcCRDOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/secrets-store-csi-driver").Output()
		if err != nil {
			t.Fatalf("locate the driver's module: %v", err)
		}
		crd, err := manifests.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", "secrets-store.csi.x-k8s.io_secretproviderclasses.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := manifests.Apply(t.Context(), c, "test", crd...); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return c.List(ctx, &secretsstorev1.SecretProviderClassList{}) == nil, nil
		}); err != nil {
			t.Fatalf("SecretProviderClass CRD not served: %v", err)
		}
	})
}

// startCPIManager runs the manager with an injected clock and a short resync.
func startCPIManager(t *testing.T, az *cloud.Cloud, clock func() time.Time, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs := &cloudtest.SyncBuffer{}
	cfg := azureConfig(az)
	go func() {
		done <- manager.Run(ctx, manager.Options{
			REST: devenvtest.ControlPlane(t).RESTConfig, Azure: cfg, SyncPeriod: time.Minute, PollInterval: 100 * time.Millisecond,
			TargetNamespaces: []string{ns}, MetricsAddr: "0", HealthAddr: "0", SkipNameValidation: true, PodIdentity: "off",
			Clock: clock, ControlPlaneResync: 300 * time.Millisecond,
			Logger: logr.FromSlogHandler(cloudtest.DebugLogger(logs).Handler()),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", tail(logs.String(), 80))
		}
		for _, secret := range []string{cfg.ClientSecret, "PRIVATE KEY", "client_secret"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("the manager logged %q", secret)
			}
		}
	})
	t.Cleanup(func() { deleteAll(t, []string{ns}) })
	// Runs first, before the ASO objects go and the manager stops: nothing with a finalizer
	// outlives it.
	t.Cleanup(func() {
		c := kube(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.DeleteAllOf(ctx, &cpv1.ControlPlaneIdentities{}, client.InNamespace(ns))
		for ctx.Err() == nil {
			var list cpv1.ControlPlaneIdentitiesList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) == 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// fakeClock is the manager's clock: real time plus an offset the test moves.
type fakeClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Add(f.offset)
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
}

// sampleObjects reads config/samples/control-plane-identities with the manager's principal id
// filled in.
func sampleObjects(t *testing.T, az *cloud.Cloud) []*unstructured.Unstructured {
	t.Helper()
	objs := readObjects(t, "../../config/samples/control-plane-identities/hcp.yaml")
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" {
			if err := unstructured.SetNestedField(u.Object, az.Settings().ObjectID, "data", "principalId"); err != nil {
				t.Fatal(err)
			}
		}
	}
	return objs
}

func getCPI(t *testing.T, c client.Client, ns, name string) *cpv1.ControlPlaneIdentities {
	t.Helper()
	o := &cpv1.ControlPlaneIdentities{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
		t.Fatal(err)
	}
	return o
}

func componentStatus(o *cpv1.ControlPlaneIdentities, name cpv1.ComponentName) (cpv1.ComponentStatus, *metav1.Condition) {
	for _, c := range o.Status.Components {
		if c.Name == name {
			return c, meta.FindStatusCondition(c.Conditions, cpv1.ConditionReady)
		}
	}
	return cpv1.ComponentStatus{}, nil
}

// waitComponent waits until cond holds for the component's status and Ready condition.
func waitComponent(t *testing.T, c client.Client, ns, name string, comp cpv1.ComponentName, what string,
	cond func(cpv1.ComponentStatus, *metav1.Condition) bool) cpv1.ComponentStatus {
	t.Helper()
	var st cpv1.ComponentStatus
	eventually(t, 2*time.Minute, what, func() (bool, string) {
		o := &cpv1.ControlPlaneIdentities{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
			return false, err.Error()
		}
		var rc *metav1.Condition
		st, rc = componentStatus(o, comp)
		if rc == nil {
			return false, "no condition yet"
		}
		return cond(st, rc), rc.Reason + ": " + rc.Message
	})
	return st
}

// hasEvent waits (events are sent asynchronously) for an event about regarding with this
// reason whose note contains the text.
func hasEvent(t *testing.T, c client.Client, ns, regarding, reason, contains string) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list := &eventsv1.EventList{}
		if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Name == regarding && e.Reason == reason && strings.Contains(e.Note, contains) {
				return true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// TestControlPlaneIdentitiesEndToEnd is the HyperShift flow through Cerulean: the sample's
// ControlPlaneIdentities applied → each component's credentials (from the managed-identity data
// plane) in its Key Vault secret, and its SecretProviderClass with exactly the reference's
// parameters → the CSI provider, driven over its socket with that class's parameters as the
// driver sends them and the nodes' identity, mounts the file → the component's library gets a
// token as its identity. A forced renewal (the manager's clock past renew_after) writes a new
// version; after a second Mount the next token comes from the new certificate with no restart.
// Credentials past cannot_renew_after are never written; a hand edit of a class is reverted;
// deleting the object deletes the secrets and classes and leaves the identities.
func TestControlPlaneIdentitiesEndToEnd(t *testing.T) {
	c := kube(t)
	installSPCCRD(t, c)
	cloudClock := cloudtest.NewClock()
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM(), Clock: cloudClock.Now})
	s := az.Settings()
	ns := namespace(t, c)
	clock := &fakeClock{}
	startCPIManager(t, az, clock.Now, ns)
	ctx := t.Context()

	objs := sampleObjects(t, az)
	create(t, c, ns, objs...)
	for _, u := range objs {
		if u.GetKind() != "ConfigMap" && u.GetKind() != "ControlPlaneIdentities" {
			waitReady(t, c, u, 2*time.Minute)
		}
	}
	var cpo cpv1.ComponentStatus
	eventually(t, 2*time.Minute, "ControlPlaneIdentities Ready", func() (bool, string) {
		o := getCPI(t, c, ns, "hcp")
		rc := meta.FindStatusCondition(o.Status.Conditions, cpv1.ConditionReady)
		if rc == nil {
			return false, "no condition"
		}
		cpo, _ = componentStatus(o, cpv1.ComponentCPO)
		return rc.Status == metav1.ConditionTrue && o.Status.ObservedGeneration == o.Generation, rc.Reason + ": " + rc.Message
	})

	owner := cloudtest.OwnerCred(t, az)
	ids, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	cpoMI, err := ids.Get(ctx, "hcp-rg", "hcp-cpo", nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ids.Get(ctx, "hcp-rg", "hcp-nodes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(cpo.IdentityID, *cpoMI.ID) || cpo.ClientID != *cpoMI.Properties.ClientID || cpo.SecretName != "managed-azure-cpo" ||
		cpo.SecretVersion == "" || cpo.RenewAfter == nil || cpo.CannotRenewAfter == nil || cpo.NotAfter == nil || cpo.SecretProviderClass != "managed-azure-cpo" {
		t.Fatalf("cpo status %+v", cpo)
	}

	// The secret holds the reference's credentials JSON, with exactly its field names.
	secrets, err := azsecrets.NewClient(cpo.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: az.ClientOptions(), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := secrets.GetSecret(ctx, "managed-azure-cpo", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(*got.Value), &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"authentication_endpoint", "client_id", "client_secret", "tenant_id", "object_id", "not_before", "not_after", "renew_after", "cannot_renew_after"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("credentials JSON lacks %s", f)
		}
	}
	if got.ID.Version() != cpo.SecretVersion || fields["client_id"] != *cpoMI.Properties.ClientID || fields["object_id"] != *cpoMI.Properties.PrincipalID {
		t.Errorf("secret version %s (status %s), client_id %v", got.ID.Version(), cpo.SecretVersion, fields["client_id"])
	}

	// One SecretProviderClass per component, exactly the reference's parameters.
	spc := &secretsstorev1.SecretProviderClass{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-azure-cpo"}, spc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"usePodIdentity": "false", "useVMManagedIdentity": "true", "userAssignedIdentityID": *nodes.Properties.ClientID,
		"keyvaultName": "hcp-kv", "tenantId": s.TenantID,
		"objects": "array:\n  - |\n    objectName: managed-azure-cpo\n    objectEncoding: utf-8\n    objectType: secret\n"}
	if spc.Spec.Provider != "azure" || len(spc.Spec.Parameters) != len(want) || len(spc.Spec.SecretObjects) != 0 {
		t.Errorf("SecretProviderClass spec %+v", spc.Spec)
	}
	for k, v := range want {
		if spc.Spec.Parameters[k] != v {
			t.Errorf("parameter %s = %q, want %q", k, spc.Spec.Parameters[k], v)
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-azure-kms"}, &secretsstorev1.SecretProviderClass{}); err != nil {
		t.Errorf("kms SecretProviderClass: %v", err)
	}
	if !hasEvent(t, c, ns, "hcp", "CredentialsIssued", "managed-azure-cpo") {
		t.Error("no CredentialsIssued event for managed-azure-cpo")
	}

	// The provider on its socket, on a node of a scale set carrying the nodes' identity.
	mount := providerFor(t, az, owner, *nodes.ID)
	target := t.TempDir() // /mnt/certs in the component's pod
	mount(spc.Spec.Parameters, target)
	t.Setenv(hcpcredentials.EnvPath, filepath.Join(target, "managed-azure-cpo"))
	cred, err := hcpcredentials.New(ctx, hcpcredentials.Options{ClientOptions: cloudtest.NoRetry(az), ReloadInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tokenApp := func() string {
		t.Helper()
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://vault.azure.net/.default"}})
		if err != nil {
			t.Fatalf("component token: %v", err)
		}
		claims, err := az.Entra().Verify(ctx, tok.Token, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		return claims.AppID
	}
	if app := tokenApp(); app != *cpoMI.Properties.ClientID {
		t.Fatalf("component token for %s, want the cpo identity %s", app, *cpoMI.Properties.ClientID)
	}

	// Forced renewal: the manager's clock just past renew_after, the cloud's two minutes on (so
	// the new certificate's not_before, and renew_after, are later: the renewed credentials are
	// not due again for two minutes).
	cloudClock.Advance(2 * time.Minute)
	clock.Advance(cpo.RenewAfter.Sub(clock.Now()) + 10*time.Second)
	renewed := waitComponent(t, c, ns, "hcp", cpv1.ComponentCPO, "renewed credentials", func(st cpv1.ComponentStatus, rc *metav1.Condition) bool {
		return st.SecretVersion != cpo.SecretVersion && rc.Status == metav1.ConditionTrue
	})
	if !renewed.NotBefore.After(cpo.NotBefore.Time) {
		t.Fatalf("renewed not_before %v, first %v", renewed.NotBefore, cpo.NotBefore)
	}
	mount(spc.Spec.Parameters, target) // the driver's rotation (the provider's cache TTL is 0 here)
	deadline := time.Now().Add(30 * time.Second)
	for !cred.Current().NotBefore.Equal(renewed.NotBefore.Time) {
		if time.Now().After(deadline) {
			t.Fatalf("the component did not load the renewed file: %+v", cred.Current())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Only the new certificate stays registered: the next token must come from it.
	dir := az.Entra().Directory
	if _, err := dir.UpdatePrincipal(ctx, s.TenantID, *cpoMI.Properties.ClientID, func(p *entra.Principal) error {
		p.Certificates = p.Certificates[len(p.Certificates)-1:]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if app := tokenApp(); app != *cpoMI.Properties.ClientID {
		t.Fatalf("token after renewal for %s", app)
	}

	// Past cannot_renew_after of what the data plane issues (its clock is behind): the manager
	// asks, refuses to store, says so, and the secret keeps its version.
	clock.Advance(100 * 24 * time.Hour)
	waitComponent(t, c, ns, "hcp", cpv1.ComponentCPO, "CredentialsUnusable", func(_ cpv1.ComponentStatus, rc *metav1.Condition) bool {
		return rc.Status == metav1.ConditionFalse && rc.Reason == cpv1.ReasonCredentialsUnusable && strings.Contains(rc.Message, "cannot_renew_after")
	})
	latest, err := secrets.GetSecret(ctx, "managed-azure-cpo", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if latest.ID.Version() != renewed.SecretVersion {
		t.Fatalf("a credential past cannot_renew_after was written: version %s, want %s", latest.ID.Version(), renewed.SecretVersion)
	}
	if !hasEvent(t, c, ns, "hcp", cpv1.ReasonCredentialsUnusable, "cannot_renew_after") {
		t.Error("no CredentialsUnusable event")
	}
	clock.Advance(-100 * 24 * time.Hour)
	waitComponent(t, c, ns, "hcp", cpv1.ComponentCPO, "Ready again", func(_ cpv1.ComponentStatus, rc *metav1.Condition) bool {
		return rc.Status == metav1.ConditionTrue
	})

	// A hand edit of a class is reverted.
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-azure-cpo"}, spc); err != nil {
		t.Fatal(err)
	}
	spc.Spec.Parameters["keyvaultName"] = "kv-elsewhere"
	spc.Spec.Parameters["extra"] = "x"
	if err := c.Update(ctx, spc); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "SecretProviderClass reverted", func() (bool, string) {
		cur := &secretsstorev1.SecretProviderClass{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-azure-cpo"}, cur); err != nil {
			return false, err.Error()
		}
		return cur.Spec.Parameters["keyvaultName"] == "hcp-kv" && len(cur.Spec.Parameters) == len(want), "parameters " + cur.Spec.Parameters["keyvaultName"]
	})
	if !hasEvent(t, c, ns, "hcp", "SecretProviderClassReverted", "managed-azure-cpo") {
		t.Error("no SecretProviderClassReverted event")
	}

	// A component dropped from the spec: its class and secret go, its identity stays.
	o := getCPI(t, c, ns, "hcp")
	o.Spec.Components = o.Spec.Components[:1]
	if o.Spec.Components[0].Name != cpv1.ComponentCPO {
		t.Fatalf("sample order changed: %v", o.Spec.Components)
	}
	if err := c.Update(ctx, o); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "kms removed", func() (bool, string) {
		o := getCPI(t, c, ns, "hcp")
		_, kms := componentStatus(o, cpv1.ComponentKMS)
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "managed-azure-kms"}, &secretsstorev1.SecretProviderClass{})
		return kms == nil && apierrors.IsNotFound(err) && len(o.Status.Components) == 1, "kms still in status or class still there"
	})
	if _, err := secrets.GetSecret(ctx, "managed-azure-kms", "", nil); err == nil {
		t.Error("the dropped component's secret is still readable")
	}

	// Delete: the secrets and classes go; the identities stay.
	if err := c.Delete(ctx, getCPI(t, c, ns, "hcp")); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "ControlPlaneIdentities gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hcp"}, &cpv1.ControlPlaneIdentities{})
		return apierrors.IsNotFound(err), "still there"
	})
	for _, name := range []string{"managed-azure-cpo", "managed-azure-kms"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &secretsstorev1.SecretProviderClass{}); !apierrors.IsNotFound(err) {
			t.Errorf("SecretProviderClass %s after delete: %v", name, err)
		}
		if _, err := secrets.GetSecret(ctx, name, "", nil); err == nil {
			t.Errorf("Key Vault secret %s still readable after delete", name)
		}
	}
	for _, name := range []string{"hcp-cpo", "hcp-kms", "hcp-nodes"} {
		if _, err := ids.Get(ctx, "hcp-rg", name, nil); err != nil {
			t.Errorf("identity %s after delete: %v", name, err)
		}
	}
}

// providerFor starts the CSI provider as it runs on a node of a scale set that carries the
// identity nodesID, and returns a mount function that drives it over its socket as the driver
// does (a SecretProviderClass's parameters plus the pod's attributes), writing the files with
// the driver's own writer.
func providerFor(t *testing.T, az *cloud.Cloud, owner azcore.TokenCredential, nodesID string) func(params map[string]string, target string) {
	t.Helper()
	ctx := t.Context()
	s := az.Settings()
	vmss, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, owner, cloudtest.ARMOptions(az))
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vmss.BeginCreateOrUpdate(ctx, "hcp-rg", "nodes", armcompute.VirtualMachineScaleSet{Location: to.Ptr("westus2"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{nodesID: {}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vars, err := msi.ComputeEnv(s.DataDir, *res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range vars {
		t.Setenv(kv[0], kv[1]) // what the provider's DaemonSet pod on that scale set sees
	}
	p, err := csiprovider.New(csiprovider.Options{Azure: azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: s.URL + cloud.VaultLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	client := csiprovidertest.Serve(t, p)
	return func(params map[string]string, target string) {
		t.Helper()
		attrib := map[string]string{csiprovider.AttrPodName: "control-plane-operator-0", csiprovider.AttrPodNamespace: "clusters-hcp",
			"csi.storage.k8s.io/pod.uid": "3f1c2b7a-0d4e-4b8a-9c6e-2a1f0e9d8c7b", csiprovider.AttrServiceAccount: "control-plane-operator",
			"secretProviderClass": "managed-azure-cpo", "csi.storage.k8s.io/ephemeral": "false"}
		for k, v := range params {
			attrib[k] = v
		}
		a, _ := json.Marshal(attrib)
		perm, _ := json.Marshal(os.FileMode(0o644))
		resp, err := client.Mount(ctx, &v1alpha1.MountRequest{Attributes: string(a), Secrets: "{}", TargetPath: target, Permission: string(perm)})
		if err != nil {
			t.Fatalf("mount: %v", err)
		}
		if err := fileutil.WritePayloads(target, resp.GetFiles()); err != nil {
			t.Fatal(err)
		}
	}
}

func principalOf(t *testing.T, az *cloud.Cloud, clientID string) entra.Principal {
	t.Helper()
	p, err := az.Entra().Directory.Principal(t.Context(), az.Settings().TenantID, clientID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
