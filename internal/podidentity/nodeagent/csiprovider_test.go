package nodeagent_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/csiprovider/csiprovidertest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// The Key Vault provider's usePodIdentity, against the real node agent: the provider, a host
// process, asks the agent's /host/token/ for the pod it mounts for (podname/podns), the agent
// answers with the identity the pod's AzureIdentityBinding assigned to the node's scale set, and
// the provider reads Key Vault with it. The agent's audit records the issuance against the
// binding; a pod without a binding gets no token and no files. The pod is registered as the
// kubelet leaves it; the real node's mount path is in internal/devenv's driver test.
func TestCSIProviderUsePodIdentityThroughTheNodeAgent(t *testing.T) {
	ctx := t.Context()
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	kc := ok(client.New(cp.RESTConfig, client.Options{Scheme: podidentitytest.Scheme(t)}))
	az := newAzure(t)

	node := "node-csi-" + uuid.NewString()[:8]
	const ns = "team-csi"
	if err := kc.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: corev1.NodeSpec{ProviderID: "azure://" + az.ssID + "/virtualMachines/0"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	podidentitytest.GrantAll(t, kc, ns)
	podidentitytest.StartController(t, cp.RESTConfig, podidentity.Options{RetryAfter: time.Second, Compute: &podidentity.ARMCompute{
		Credential: az.owner, Options: az.opts, PollFrequency: 20 * time.Millisecond}})

	// The agent as on a node, without the pods' DNAT (the provider is a host caller).
	lines, err := cloud.ComputeEnv(az.s.DataDir, az.ssID)
	if err != nil {
		t.Fatal(err)
	}
	header := ""
	for _, l := range lines {
		if v, found := strings.CutPrefix(l, "IDENTITY_HEADER="); found {
			header = v
		}
	}
	cloudURL := ok(url.Parse(az.s.URL))
	agent, err := nodeagent.New(nodeagent.Options{
		NodeName: node, Config: cp.RESTConfig, Listen: "127.0.0.1:0", NodeIP: net.IPv4(127, 0, 0, 1),
		Tokens: &nodeagent.IMDSSource{Endpoint: az.s.URL, Header: header, Client: &http.Client{Transport: az.c.Transport()}},
		IMDS:   cloudURL, IMDSHeader: header, IMDSTransport: az.c.Transport(),
		AssignWait: 10 * time.Second, FlushPeriod: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()
	t.Cleanup(func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	// The user's aad-pod-identity objects and two pods on the node: one bound, one not.
	for _, o := range []client.Object{
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "id-a"},
			Spec: aadv1.AzureIdentitySpec{Type: aadv1.UserAssignedMSI, ResourceID: *az.ids["id-a"].ID, ClientID: *az.ids["id-a"].Properties.ClientID}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bind-a"},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "id-a", Selector: "app-a"}},
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-a", Labels: map[string]string{aadv1.PodLabel: "app-a"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unbound"}},
	} {
		p.Spec = corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}
		if err := kc.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		ip := net.IPv4(10, 99, 0, byte(10+i)).String()
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
		if err := kc.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kc.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
	}

	secrets := ok(azsecrets.NewClient(az.vaultURI, az.owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(az.c), DisableChallengeResourceVerification: true}))
	want := "s3cret-" + uuid.NewString()
	if _, err := secrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: &want}, nil); err != nil {
		t.Fatal(err)
	}

	// The provider pointed at the agent, on its socket, called as the driver calls it.
	p, err := csiprovider.New(csiprovider.Options{
		Azure:     azure.Config{AuthorityHost: az.s.AuthorityHost, CAFile: az.s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: az.s.URL + cloud.VaultLookupPath,
		PodIdentityEndpoint: "http://" + agent.Addr(), CacheTTL: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	provider := csiprovidertest.Serve(t, p)
	mount := func(pod string) (*v1alpha1.MountResponse, error) {
		attrib, _ := json.Marshal(map[string]string{
			"usePodIdentity": "true", "keyvaultName": "kv-app", "tenantId": az.s.TenantID,
			"objects":               "array:\n  - |\n    objectName: db-password\n    objectType: secret\n",
			csiprovider.AttrPodName: pod, csiprovider.AttrPodNamespace: ns,
			"csi.storage.k8s.io/pod.uid": uuid.NewString(), csiprovider.AttrServiceAccount: "default",
			"secretProviderClass": "kv", "csi.storage.k8s.io/ephemeral": "false",
		})
		perm, _ := json.Marshal(os.FileMode(0o644))
		return provider.Mount(ctx, &v1alpha1.MountRequest{Attributes: string(attrib), Secrets: "{}", TargetPath: t.TempDir(), Permission: string(perm)})
	}

	// The binding's identity is assigned to the scale set by the controller; the agent waits
	// for it (AssignWait) if the first mount comes sooner.
	resp, err := mount("app-a")
	if err != nil {
		t.Fatalf("mount for the bound pod: %v", err)
	}
	if files := resp.GetFiles(); len(files) != 1 || files[0].Path != "db-password" || string(files[0].Contents) != want {
		t.Fatalf("mount for the bound pod returned %d files, want db-password with the secret", len(files))
	}

	_, err = mount("unbound")
	if err == nil || !strings.Contains(err.Error(), "No AzureIdentityBinding matches") {
		t.Fatalf("mount for a pod without a binding: %v, want the agent's refusal", err)
	}
	if strings.Contains(err.Error(), want) {
		t.Fatal("the refusal carries the secret")
	}

	// The agent's audit counts the provider's request against the binding, naming the pod.
	if err := agent.FlushAudit(ctx); err != nil {
		t.Fatal(err)
	}
	var evs corev1.EventList
	if err := kc.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	issued := false
	for _, ev := range evs.Items {
		if ev.Reason == nodeagent.ReasonTokenIssued && ev.InvolvedObject.Name == "bind-a" && strings.Contains(ev.Message, ns+"/app-a") {
			issued = true
		}
	}
	if !issued {
		t.Fatalf("no %s event for bind-a naming %s/app-a among %d events", nodeagent.ReasonTokenIssued, ns, len(evs.Items))
	}
}
