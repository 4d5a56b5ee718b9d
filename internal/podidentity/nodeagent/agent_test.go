package nodeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/metricstest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

const (
	roleSecretsUser    = "4633458b-17de-408a-b874-0445c86b69e6"
	roleSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
	vaultResource      = "https://vault.azure.net"
)

var poll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

// azureEnv is the cloud side: identities, a scale set standing for the node pool, a vault.
type azureEnv struct {
	c        *cloud.Cloud
	s        cloud.Settings
	owner    azcore.TokenCredential
	opts     *arm.ClientOptions
	ids      map[string]armmsi.Identity
	ss       *armcompute.VirtualMachineScaleSetsClient
	ssID     string
	vaultURI string
}

// ok returns v, or panics (failing the test) on err.
func ok[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func assignRole(t *testing.T, e *azureEnv, scope, role, principal string) {
	t.Helper()
	ra := ok(armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, e.owner, e.opts))
	_, err := ra.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
		PrincipalID:      to.Ptr(principal), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil)
	if err != nil {
		t.Fatalf("assign role: %v", err)
	}
}

func newAzure(t *testing.T) *azureEnv {
	t.Helper()
	ctx := t.Context()
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	e := &azureEnv{c: c, s: c.Settings(), owner: cloudtest.OwnerCred(t, c), opts: cloudtest.ARMOptions(c), ids: map[string]armmsi.Identity{}}
	rg := cloudtest.CreateGroup(t, c, e.owner, e.opts, "westeurope", "rg")
	mis := ok(armmsi.NewUserAssignedIdentitiesClient(e.s.SubscriptionID, e.owner, e.opts))
	for _, name := range []string{"id-a", "id-b", "id-pre"} {
		mi, err := mis.CreateOrUpdate(ctx, "rg", name, armmsi.Identity{Location: to.Ptr("westeurope")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.ids[name] = mi.Identity
	}
	e.ss = ok(armcompute.NewVirtualMachineScaleSetsClient(e.s.SubscriptionID, e.owner, e.opts))
	p := ok(e.ss.BeginCreateOrUpdate(ctx, "rg", "nodes", armcompute.VirtualMachineScaleSet{
		Location: to.Ptr("westeurope"),
		Identity: &armcompute.VirtualMachineScaleSetIdentity{Type: to.Ptr(armcompute.ResourceIdentityTypeSystemAssignedUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{*e.ids["id-pre"].ID: {}}},
	}, nil))
	e.ssID = *ok(p.PollUntilDone(ctx, poll)).ID

	v := cloudtest.CreateRBACVault(t, e.c, e.owner, e.opts, "westeurope", "rg", "kv-app")
	e.vaultURI = *v.Properties.VaultURI
	assignRole(t, e, *v.ID, roleSecretsOfficer, e.s.ObjectID)
	assignRole(t, e, *v.ID, roleSecretsUser, *e.ids["id-a"].Properties.PrincipalID)
	_ = rg
	return e
}

// userIdentities reads the scale set's user-assigned identity ids (lower case).
func (e *azureEnv) userIdentities(t *testing.T) map[string]bool {
	t.Helper()
	res := ok(e.ss.Get(t.Context(), "rg", "nodes", nil))
	out := map[string]bool{}
	if res.Identity != nil {
		for id := range res.Identity.UserAssignedIdentities {
			out[strings.ToLower(id)] = true
		}
	}
	return out
}

func (e *azureEnv) has(t *testing.T, name string) bool {
	return e.userIdentities(t)[strings.ToLower(*e.ids[name].ID)]
}

// eventually polls cond every 100ms; the 3-minute bound only stops a hung test (a loaded 2-core
// machine has needed more than a minute).
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 3*time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

type getAnswer struct {
	Status int            `json:"status"`
	Body   map[string]any `json:"body"`
}

// podGet runs n GETs of IMDS's token path inside the pod and returns the last answer.
func podGet(t *testing.T, p *netPod, query string, n int, extra ...string) getAnswer {
	t.Helper()
	env := append([]string{"CERULEAN_POD_HELPER=get", "URL=http://169.254.169.254/metadata/identity/oauth2/token?" + query, fmt.Sprintf("N=%d", n)}, extra...)
	out, errOut, err := p.exec(t, env...)
	if err != nil {
		t.Fatalf("helper in %s: %v: %s", p.ns, err, errOut)
	}
	var a getAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("helper answer %q: %v", out, err)
	}
	return a
}

func q(resource string, kv ...string) string {
	v := url.Values{"api-version": {"2018-02-01"}, "resource": {resource}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func TestPodIdentityThroughTheNetworkPath(t *testing.T) {
	needRoot(t)
	ctx := t.Context()
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	kc := ok(client.New(cp.RESTConfig, client.Options{Scheme: podidentitytest.Scheme(t)}))
	az := newAzure(t)
	net := newNetwork(t, "cerulean-nmi-t")
	table := net.table

	// The node: an instance of the scale set.
	node := "node-" + net.tag
	if err := kc.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: corev1.NodeSpec{ProviderID: "azure://" + az.ssID + "/virtualMachines/0"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	for _, ns := range []string{"team-a", "team-b"} {
		if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	podidentitytest.GrantAll(t, kc, "team-a", "team-b")

	var patches atomic.Int64
	podidentitytest.StartController(t, cp.RESTConfig, podidentity.Options{RetryAfter: time.Second, Compute: &podidentity.ARMCompute{
		Credential: az.owner, Options: az.opts, PollFrequency: 20 * time.Millisecond, Patches: func() { patches.Add(1) }}})

	lines, err := cloud.ComputeEnv(az.s.DataDir, az.ssID)
	if err != nil {
		t.Fatal(err)
	}
	header := ""
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, "IDENTITY_HEADER="); ok {
			header = v
		}
	}
	// What a killed agent leaves: its table with a DNAT to its dead port, in a chain ahead of
	// the new agent's. The new agent must clear it, or pods' requests are refused.
	nft(t, fmt.Sprintf(`table ip %s {
		chain stale { type nat hook prerouting priority dstnat - 2; iifname %q ip daddr %s tcp dport 80 dnat to %s:1; }
	}`, table, strings.TrimSuffix(net.ifacePattern(), "+")+"*", nodeagent.MetadataIP, net.nodeIP))
	t.Cleanup(func() { _ = exec.Command("nft", "delete", "table", "ip", table).Run() })
	cloudURL := ok(url.Parse(az.s.URL))
	agent, err := nodeagent.New(nodeagent.Options{
		NodeName: node, Config: cp.RESTConfig, Listen: net.nodeIP.String() + ":0", NodeIP: net.nodeIP,
		PodInterfaces: []string{net.ifacePattern()}, Table: table,
		Tokens: &nodeagent.IMDSSource{Endpoint: az.s.URL, Header: header, Client: &http.Client{Transport: az.c.Transport()}},
		IMDS:   cloudURL, IMDSHeader: header, IMDSTransport: az.c.Transport(),
		AssignWait: 3 * time.Second, SyncPeriod: 200 * time.Millisecond, FlushPeriod: time.Hour, MetricsAddr: "127.0.0.1:0",
	})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(context.Background())
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopAgent()
			if err := <-agentDone; err != nil {
				t.Errorf("agent: %v", err)
			}
		}
	}
	t.Cleanup(stop)

	// Users' objects, as they are written for aad-pod-identity.
	apply := func(objs ...client.Object) {
		t.Helper()
		for _, o := range objs {
			if err := kc.Create(ctx, o); err != nil {
				t.Fatalf("create %T %s: %v", o, o.GetName(), err)
			}
		}
	}
	identity := func(ns, name, mi string) *aadv1.AzureIdentity {
		return &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentitySpec{Type: aadv1.UserAssignedMSI, ResourceID: mi, ClientID: *az.ids[name].Properties.ClientID}}
	}
	binding := func(ns, name, id, sel string) *aadv1.AzureIdentityBinding {
		return &aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: id, Selector: sel}}
	}
	apply(identity("team-a", "id-a", *az.ids["id-a"].ID), binding("team-a", "bind-a", "id-a", "app-a"),
		&aadv1.AzurePodIdentityException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bypass"},
			Spec: aadv1.AzurePodIdentityExceptionSpec{PodLabels: map[string]string{"bypass": "yes"}}})

	// registerPod creates the Pod as a scheduler and kubelet would leave it: on the node, Running,
	// with the namespace's address as its IP.
	registerPod := func(ns, name string, labels map[string]string, np *netPod) *corev1.Pod {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		apply(p)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: np.ip.String(), PodIPs: []corev1.PodIP{{IP: np.ip.String()}}}
		if err := kc.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kc.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
		return p
	}
	pa := net.addPod()
	podA := registerPod("team-a", "app-a", map[string]string{aadv1.PodLabel: "app-a"}, pa)

	// The SDK in the pod reads the secret through IMDS at 169.254.169.254.
	secrets := ok(azsecrets.NewClient(az.vaultURI, az.owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(az.c), DisableChallengeResourceVerification: true}))
	want := "s3cret-" + uuid.NewString()
	if _, err := secrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: &want}, nil); err != nil {
		t.Fatal(err)
	}
	vaultHost := ok(url.Parse(az.vaultURI)).Host
	pa.forward(t, vaultHost)
	out, errOut, err := pa.exec(t, "CERULEAN_POD_HELPER=keyvault", "VAULT="+az.vaultURI, "SECRET=db-password", "SSL_CERT_FILE="+az.s.CAFile)
	if err != nil || out != want {
		t.Fatalf("pod read %q (want the secret): %v: %s", out, err, errOut)
	}
	var aai aadv1.AzureAssignedIdentity
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: podidentity.AssignedName(podA, binding("team-a", "bind-a", "", ""))}, &aai); err != nil {
		t.Fatal(err)
	}
	if aai.Status.Status != aadv1.AssignedIDAssigned || aai.Spec.NodeName != node || aai.Spec.AzureIdentityRef.Spec.ClientID != *az.ids["id-a"].Properties.ClientID {
		t.Fatalf("assigned identity: %+v", aai)
	}
	if !az.has(t, "id-a") || !az.has(t, "id-pre") {
		t.Fatalf("scale set identities %v: want id-a added and id-pre kept", az.userIdentities(t))
	}

	t.Run("cache and aggregated audit", func(t *testing.T) {
		before := agent.Tokens().UpstreamCalls()
		// aad-pod-identity's series count every answer and, among the agent's own token
		// fetches from the node's IMDS, only the cache's misses.
		issuedA := []string{`operation_type="/metadata/identity/oauth2/token"`, `status_code="200"`, `namespace="team-a"`, `resource="` + vaultResource + `"`}
		const fetched = "aadpodidentity_imds_operations_duration_seconds_count"
		fetchLabel := `operation_type="adal_token_msi_userassignedid"`
		m0 := ok(metricstest.Scrape("http://" + agent.MetricsAddr()))
		if metricstest.Sum(m0, nmiCount, issuedA...) < 1 || metricstest.Sum(m0, fetched, fetchLabel) < 1 {
			t.Fatalf("the SDK's token is not in the agent's metrics:\n%s", m0)
		}
		a := podGet(t, pa, q(vaultResource), 30)
		if a.Status != http.StatusOK || a.Body["client_id"] != *az.ids["id-a"].Properties.ClientID || a.Body["expires_in"] == "" {
			t.Fatalf("token: %+v", a)
		}
		if got := agent.Tokens().UpstreamCalls() - before; got != 0 {
			t.Fatalf("30 requests for a cached token made %d upstream calls", got)
		}
		m1 := ok(metricstest.Scrape("http://" + agent.MetricsAddr()))
		if got := metricstest.Sum(m1, nmiCount, issuedA...) - metricstest.Sum(m0, nmiCount, issuedA...); got != 30 {
			t.Errorf("30 tokens issued, the NMI histogram counted %v", got)
		}
		if got := metricstest.Sum(m1, fetched, fetchLabel) - metricstest.Sum(m0, fetched, fetchLabel); got != 0 {
			t.Errorf("30 cached tokens, %v IMDS fetches counted", got)
		}
		token, _ := a.Body["access_token"].(string)
		if err := agent.FlushAudit(ctx); err != nil {
			t.Fatal(err)
		}
		var evs corev1.EventList
		if err := kc.List(ctx, &evs, client.InNamespace("team-a")); err != nil {
			t.Fatal(err)
		}
		var issued []corev1.Event
		for _, ev := range evs.Items {
			if token != "" && strings.Contains(ev.Message, token) {
				t.Fatalf("an Event carries the token: %s", ev.Name)
			}
			if ev.Reason == nodeagent.ReasonTokenIssued && ev.InvolvedObject.Name == "bind-a" && ev.InvolvedObject.Kind == "AzureIdentityBinding" {
				issued = append(issued, ev)
			}
		}
		// The SDK's request and these 30 are one Event.
		if len(issued) != 1 || issued[0].Count < 31 || !strings.Contains(issued[0].Message, "team-a/app-a") {
			t.Fatalf("issued events: %+v", issued)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		pb := net.addPod()
		registerPod("team-b", "same-label", map[string]string{aadv1.PodLabel: "app-a"}, pb)
		if a := podGet(t, pb, q(vaultResource), 1); a.Status != http.StatusForbidden || !strings.Contains(fmt.Sprint(a.Body["error_description"]), "No AzureIdentityBinding matches") {
			t.Fatalf("pod of another namespace with the same label: %+v", a)
		}
		pc := net.addPod()
		registerPod("team-a", "unlabelled", nil, pc)
		if a := podGet(t, pc, q(vaultResource), 1); a.Status != http.StatusForbidden {
			t.Fatalf("pod without a binding: %+v", a)
		}
		unknown := net.addPod() // a namespace that is no registered pod
		if a := podGet(t, unknown, q(vaultResource), 1); a.Status != http.StatusForbidden || !strings.Contains(fmt.Sprint(a.Body["error_description"]), "is not a pod of node") {
			t.Fatalf("unknown source address: %+v", a)
		}
		if a := podGet(t, pa, q(vaultResource), 1, "NO_METADATA=1"); a.Status != http.StatusBadRequest || a.Body["error_description"] != "Required metadata header not specified" {
			t.Fatalf("no Metadata header: %+v", a)
		}
		if a := podGet(t, pa, "api-version=2018-02-01", 1); a.Status != http.StatusBadRequest || a.Body["error"] != "invalid_request" {
			t.Fatalf("no resource: %+v", a)
		}
		if a := podGet(t, pa, q(vaultResource, "client_id", *az.ids["id-b"].Properties.ClientID), 1); a.Status != http.StatusForbidden {
			t.Fatalf("an identity not bound to the pod: %+v", a)
		}
		// A host-network caller gets only /host/token/.
		hc := &http.Client{Timeout: 30 * time.Second}
		base := "http://" + agent.Addr()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metadata/identity/oauth2/token?"+q(vaultResource), nil)
		req.Header.Set("Metadata", "true")
		resp := ok(hc.Do(req))
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("host caller on the pod path: %d", resp.StatusCode)
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/host/token/?resource="+url.QueryEscape(vaultResource), nil)
		req.Header.Set("podname", "app-a")
		req.Header.Set("podns", "team-a")
		resp = ok(hc.Do(req))
		var ht struct {
			Token    map[string]any `json:"token"`
			ClientID string         `json:"clientid"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&ht)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || ht.ClientID != *az.ids["id-a"].Properties.ClientID || ht.Token["access_token"] == "" {
			t.Fatalf("/host/token/: %d %s", resp.StatusCode, ht.ClientID)
		}
	})

	t.Run("instance metadata blocked, exception pods passed through", func(t *testing.T) {
		out, errOut, err := pa.exec(t, "CERULEAN_POD_HELPER=get", "URL=http://169.254.169.254/metadata/instance?api-version=2021-02-01")
		if err != nil || !strings.Contains(out, `"status":403`) {
			t.Fatalf("/metadata/instance: %s %v %s", out, err, errOut)
		}
		pe := net.addPod()
		registerPod("team-a", "exempt", map[string]string{"bypass": "yes"}, pe)
		a := podGet(t, pe, q(vaultResource), 1)
		// The node's own (system-assigned) identity answers: the request went to the node's IMDS.
		if a.Status != http.StatusOK || a.Body["client_id"] == *az.ids["id-a"].Properties.ClientID || a.Body["client_id"] == "" {
			t.Fatalf("exception pod: %+v", a)
		}
	})

	t.Run("one failing identity does not block the other", func(t *testing.T) {
		missing := strings.Replace(*az.ids["id-b"].ID, "id-b", "id-missing", 1)
		apply(identity("team-a", "id-b", *az.ids["id-b"].ID), binding("team-a", "bind-b", "id-b", "app-b"),
			&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "id-missing"},
				Spec: aadv1.AzureIdentitySpec{ResourceID: missing, ClientID: uuid.NewString()}},
			binding("team-a", "bind-missing", "id-missing", "app-b"))
		pd := net.addPod()
		podB := registerPod("team-a", "app-b", map[string]string{aadv1.PodLabel: "app-b"}, pd)
		get := func(b string) aadv1.AzureAssignedIdentity {
			var a aadv1.AzureAssignedIdentity
			_ = kc.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: podidentity.AssignedName(podB, binding("team-a", b, "", ""))}, &a)
			return a
		}
		eventually(t, "id-b assigned and id-missing failed", func(context.Context) (bool, error) {
			return get("bind-b").Status.Status == aadv1.AssignedIDAssigned && get("bind-missing").Status.Message != "", nil
		})
		if bad := get("bind-missing"); bad.Status.Status != aadv1.AssignedIDCreated || !strings.Contains(bad.Status.Message, "not found") {
			t.Fatalf("failing identity: %+v", bad.Status)
		}
		if !az.has(t, "id-b") {
			t.Fatal("id-b is not on the scale set")
		}
		if a := podGet(t, pd, q(vaultResource, "client_id", *az.ids["id-b"].Properties.ClientID), 1); a.Status != http.StatusOK {
			t.Fatalf("id-b token: %+v", a)
		}
		// The identity that cannot be assigned: the request waits (bounded) and then says so.
		missingClient := ""
		var idm aadv1.AzureIdentity
		if err := kc.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "id-missing"}, &idm); err == nil {
			missingClient = idm.Spec.ClientID
		}
		if a := podGet(t, pd, q(vaultResource, "client_id", missingClient), 1); a.Status != http.StatusNotFound || a.Body["error"] != "identity_not_assigned" {
			t.Fatalf("an identity not assigned yet: %+v", a)
		}
		eventually(t, "a Warning event for the failing identity", func(ctx context.Context) (bool, error) {
			var evs corev1.EventList
			if err := kc.List(ctx, &evs, client.InNamespace("team-a")); err != nil {
				return false, err
			}
			for _, ev := range evs.Items {
				if ev.Reason == podidentity.ReasonAssignmentFailed && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "id-missing") {
					return true, nil
				}
			}
			return false, nil
		})
	})

	t.Run("removed binding", func(t *testing.T) {
		if err := kc.Delete(ctx, binding("team-a", "bind-a", "", "")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "id-a off the scale set and the assignment gone", func(ctx context.Context) (bool, error) {
			var a aadv1.AzureAssignedIdentity
			err := kc.Get(ctx, client.ObjectKeyFromObject(&aai), &a)
			return apierrors.IsNotFound(err) && !az.has(t, "id-a"), nil
		})
		if !az.has(t, "id-pre") {
			t.Fatal("the pre-assigned identity was removed")
		}
		// The token is still in the cache; the pod gets it no more.
		if a := podGet(t, pa, q(vaultResource), 1); a.Status != http.StatusForbidden {
			t.Fatalf("after the binding's removal: %+v", a)
		}
	})

	t.Run("rules re-created when missing, removed on exit", func(t *testing.T) {
		run(t, "nft", "flush", "chain", "ip", table, "prerouting")
		eventually(t, "the DNAT rule back", func(ctx context.Context) (bool, error) {
			out, err := exec.CommandContext(ctx, "nft", "list", "chain", "ip", table, "prerouting").Output()
			return err == nil && strings.Contains(string(out), "dnat to "+agent.Addr()), nil
		})
		// The pods' path works again through the re-created rule.
		if a := podGet(t, pa, q(vaultResource), 1); a.Status != http.StatusForbidden {
			t.Fatalf("after the rules came back: %+v, want the agent's 403", a)
		}
		stop()
		if left := leftovers("\x00", table); len(left) > 0 {
			t.Fatalf("after the agent's exit: %v", left)
		}
	})
	t.Logf("%d PATCHes of the scale set (the failing identity is retried every second)", patches.Load())
}
