package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

func init() {
	register(section{title: "Pod identity", run: benchPodIdentity})
}

const (
	podIdentityPods = 2000
	benchIdentities = 4
	benchNodes      = 4 // two per scale set
)

// benchPodIdentity measures, against a real kube-apiserver and the local cloud: the time for
// 2,000 pods on the four nodes of two scale sets (created as a scheduler binds them, 16 at a
// time) to have every AzureAssignedIdentity Assigned, and the ARM PATCHes the controller made
// (aad-pod-identity made one per change, serialised per scale set); then token latency through
// the node agent, cached and uncached, against the cloud's IMDS-style endpoint called directly
// in the same run (the agent's uncached path adds its lookups and one such call). The client
// reaches the agent from 127.0.0.2, the address of a registered pod; no DNAT rules.
func benchPodIdentity(ctx context.Context, env benchEnv) ([]row, error) {
	cp, err := devenv.Start(ctx, devenv.Options{DataDir: filepath.Join(env.scratch, "podidentity-cp"), BinDir: env.binDir})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	if err := podidentitytest.InstallCRDsE(ctx, cp.RESTConfig); err != nil {
		return nil, err
	}
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "podidentity-cloud", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	az, err := newPodIdentityAzure(ctx, c)
	if err != nil {
		return nil, err
	}
	cfg := *cp.RESTConfig
	cfg.QPS, cfg.Burst = 500, 1000
	kc, nodes, err := createPodIdentityObjects(ctx, &cfg, az)
	if err != nil {
		return nil, err
	}
	var patches atomic.Int64
	stopController, err := podidentitytest.StartControllerE(&cfg, podidentity.Options{Compute: &podidentity.ARMCompute{
		Credential: az.cred, Options: az.armOpts, PollFrequency: time.Second, Patches: func() { patches.Add(1) }}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = stopController() }()

	start := time.Now()
	if err := createBoundPods(ctx, kc, nodes); err != nil {
		return nil, err
	}
	created := time.Since(start)
	if err := waitAllAssigned(ctx, kc); err != nil {
		return nil, err
	}
	assigned := time.Since(start)
	rows := assignmentRows(created, assigned, patches.Load())

	tokenRows, err := benchAgentTokens(ctx, cp, c, kc, nodes[0], az.ssIDs[0], az.ids[0])
	if err != nil {
		return nil, err
	}
	return append(rows, tokenRows...), nil
}

// podIdentityNamespace holds the pod-identity benchmark's identities, bindings and pods.
const podIdentityNamespace = "default"

// podIdentityAzure is the Azure side of the pod-identity benchmark: the owner's credential and
// client options, benchIdentities managed identities and two scale sets' ids, in rg-bench.
type podIdentityAzure struct {
	cred    azcore.TokenCredential
	armOpts *arm.ClientOptions
	ids     []armmsi.Identity
	ssIDs   []string
}

// newPodIdentityAzure creates rg-bench, the managed identities and the two scale sets as the
// owner, with the SDK's retries off.
func newPodIdentityAzure(ctx context.Context, c *cloud.Cloud) (*podIdentityAzure, error) {
	s := c.Settings()
	opts := c.ClientOptions()
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	cred, err := ownerCred(c, opts)
	if err != nil {
		return nil, err
	}
	az := &podIdentityAzure{cred: cred, armOpts: &arm.ClientOptions{ClientOptions: opts}}
	if err := createBenchGroup(ctx, s, cred, az.armOpts); err != nil {
		return nil, fmt.Errorf("create resource group: %w", err)
	}
	mis, err := armmsi.NewUserAssignedIdentitiesClient(s.SubscriptionID, cred, az.armOpts)
	if err != nil {
		return nil, err
	}
	for i := range benchIdentities {
		mi, err := mis.CreateOrUpdate(ctx, "rg-bench", fmt.Sprintf("id-%d", i), armmsi.Identity{Location: to.Ptr("eastus")}, nil)
		if err != nil {
			return nil, fmt.Errorf("create identity: %w", err)
		}
		az.ids = append(az.ids, mi.Identity)
	}
	sss, err := armcompute.NewVirtualMachineScaleSetsClient(s.SubscriptionID, cred, az.armOpts)
	if err != nil {
		return nil, err
	}
	for i := range 2 {
		p, err := sss.BeginCreateOrUpdate(ctx, "rg-bench", fmt.Sprintf("ss-%d", i), armcompute.VirtualMachineScaleSet{Location: to.Ptr("eastus")}, nil)
		if err != nil {
			return nil, fmt.Errorf("create scale set: %w", err)
		}
		res, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second})
		if err != nil {
			return nil, fmt.Errorf("create scale set: %w", err)
		}
		az.ssIDs = append(az.ssIDs, *res.ID)
	}
	return az, nil
}

// createPodIdentityObjects creates, through cfg, benchNodes nodes spread over az's scale sets and
// an AzureIdentity and AzureIdentityBinding (selector: its own name) per identity of az. It
// returns the client and the nodes' names.
func createPodIdentityObjects(ctx context.Context, cfg *rest.Config, az *podIdentityAzure) (client.Client, []string, error) {
	scheme, err := podidentitytest.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	const ns = podIdentityNamespace
	var nodes []string
	for i := range benchNodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("azure://%s/virtualMachines/%d", az.ssIDs[i%2], i)}}
		if err := kc.Create(ctx, n); err != nil {
			return nil, nil, fmt.Errorf("create node: %w", err)
		}
		nodes = append(nodes, n.Name)
	}
	for i, mi := range az.ids {
		name := fmt.Sprintf("id-%d", i)
		if err := kc.Create(ctx, &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentitySpec{ResourceID: *mi.ID, ClientID: *mi.Properties.ClientID}}); err != nil {
			return nil, nil, fmt.Errorf("create identity: %w", err)
		}
		if err := kc.Create(ctx, &aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: name, Selector: name}}); err != nil {
			return nil, nil, fmt.Errorf("create binding: %w", err)
		}
	}
	return kc, nodes, nil
}

// createBoundPods creates podIdentityPods pods, 16 at a time, as a scheduler binds them: each
// already on one of nodes and labelled for one of the identities, in turn.
func createBoundPods(ctx context.Context, kc client.Client, nodes []string) error {
	var createErr atomic.Value
	var wg sync.WaitGroup
	next := make(chan int, podIdentityPods)
	for i := range podIdentityPods {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podIdentityNamespace, Name: fmt.Sprintf("pod-%d", i),
					Labels: map[string]string{aadv1.PodLabel: fmt.Sprintf("id-%d", i%benchIdentities)}},
					Spec: corev1.PodSpec{NodeName: nodes[(i/benchIdentities)%benchNodes], Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
				if err := kc.Create(ctx, p); err != nil {
					createErr.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := createErr.Load().(error); err != nil {
		return fmt.Errorf("create pods: %w", err)
	}
	return nil
}

// waitAllAssigned polls every 250 ms, for up to 10 minutes, until podIdentityPods
// AzureAssignedIdentities are Assigned.
func waitAllAssigned(ctx context.Context, kc client.Client) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var list aadv1.AzureAssignedIdentityList
		if err := kc.List(ctx, &list, client.InNamespace(podIdentityNamespace)); err != nil {
			return err
		}
		n := 0
		for _, a := range list.Items {
			if a.Status.Status == aadv1.AssignedIDAssigned {
				n++
			}
		}
		if n == podIdentityPods {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d assignments Assigned after 10 minutes", n, podIdentityPods)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// assignmentRows is the assignment half of benchPodIdentity's table: the time to create the
// pods, the time until every identity was Assigned (both from the first create), and the
// controller's ARM PATCHes.
func assignmentRows(created, assigned time.Duration, patches int64) []row {
	return []row{
		{benchmark: fmt.Sprintf("%d pods on 2 scale sets, %d identities: pods created", podIdentityPods, benchIdentities), result: created.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("%d pods on 2 scale sets: every identity Assigned (from the first create)", podIdentityPods), result: assigned.Round(10 * time.Millisecond).String()},
		{benchmark: fmt.Sprintf("%d pods on 2 scale sets: ARM PATCHes of the scale sets", podIdentityPods), result: fmt.Sprint(patches),
			vsBaseline: fmt.Sprintf("%d identity additions (upstream: one PATCH each, serialised)", 2*benchIdentities)},
	}
}

// benchAgentTokens runs a node agent for node on 127.0.0.1 and measures tokens for a pod at
// 127.0.0.2 bound to identity mi, against the cloud's IMDS-style endpoint called directly.
func benchAgentTokens(ctx context.Context, cp *devenv.ControlPlane, c *cloud.Cloud, kc client.Client, node, ssID string, mi armmsi.Identity) ([]row, error) {
	s := c.Settings()
	pairs, err := msi.ComputeEnv(s.DataDir, ssID)
	if err != nil {
		return nil, err
	}
	header := pairs[1][1]
	hc, tr := loadClient(c)
	defer tr.CloseIdleConnections()
	cloudURL, err := url.Parse(s.URL)
	if err != nil {
		return nil, err
	}
	agent, err := nodeagent.New(nodeagent.Options{NodeName: node, Config: cp.RESTConfig, Listen: "127.0.0.1:0",
		Tokens: &nodeagent.IMDSSource{Endpoint: s.URL, Header: header, Client: hc}, IMDS: cloudURL, IMDSHeader: header, IMDSTransport: tr,
		FlushPeriod: time.Hour})
	if err != nil {
		return nil, err
	}
	agentCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(agentCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "node agent:", err)
		}
	}()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bench-client", Labels: map[string]string{aadv1.PodLabel: "id-0"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if err := kc.Create(ctx, pod); err != nil {
		return nil, err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.2", PodIPs: []corev1.PodIP{{IP: "127.0.0.2"}}}
	if err := kc.Status().Update(ctx, pod); err != nil {
		return nil, err
	}
	podTransport := &http.Transport{MaxIdleConnsPerHost: 64, Proxy: nil,
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}
	defer podTransport.CloseIdleConnections()
	podClient := &http.Client{Transport: podTransport}
	base := "http://" + agent.Addr() + "/metadata/identity/oauth2/token?api-version=2018-02-01&resource="
	get := func(hc *http.Client, u string, h map[string]string) error {
		status, err := send(ctx, hc, http.MethodGet, u, "", h)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("token answered %d", status)
		}
		return nil
	}
	// The first request waits for the assignment (bounded by the agent).
	for i := 0; ; i++ {
		if err := get(podClient, base+url.QueryEscape("https://vault.azure.net"), map[string]string{"Metadata": "true"}); err == nil {
			break
		} else if i == 20 {
			return nil, fmt.Errorf("first token through the agent: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var n atomic.Int64
	uniq := func() string { return url.QueryEscape(fmt.Sprintf("api://bench-%d", n.Add(1))) }
	direct := func(context.Context) error {
		return get(hc, s.URL+msi.IMDSPath+"?api-version=2018-02-01&client_id="+*mi.Properties.ClientID+"&resource="+uniq(),
			map[string]string{"Metadata": "true", msi.HeaderName: header})
	}
	cached := func(context.Context) error {
		return get(podClient, base+url.QueryEscape("https://vault.azure.net"), map[string]string{"Metadata": "true"})
	}
	uncached := func(context.Context) error {
		return get(podClient, base+uniq(), map[string]string{"Metadata": "true"})
	}
	var rows []row
	for _, conc := range []int{1, 8} {
		total := 500 * conc
		d := benchutil.Load(ctx, conc, total, 20*time.Second, direct)
		u := benchutil.Load(ctx, conc, total, 20*time.Second, uncached)
		k := benchutil.Load(ctx, conc, total, 20*time.Second, cached)
		rows = append(rows,
			row{benchmark: fmt.Sprintf("baseline: cloud IMDS-style endpoint directly, new resource each, %d concurrent", conc), result: d.String()},
			row{benchmark: fmt.Sprintf("token through the node agent, uncached, %d concurrent", conc), result: u.String(), vsBaseline: ratio(u.RPS(), d.RPS()) + " of direct rps"},
			row{benchmark: fmt.Sprintf("token through the node agent, cached, %d concurrent", conc), result: k.String(), vsBaseline: ratio(k.RPS(), d.RPS()) + " of direct rps"},
		)
	}
	return rows, nil
}
