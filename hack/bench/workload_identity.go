package main

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/pki"
	"github.com/cerulean/cerulean/internal/webhook/registration"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func init() {
	register(section{title: "Workload identity webhook", run: benchWorkloadIdentity})
}

const (
	wiNamespace   = "bench-wi"
	wiPacedRate   = 50   // pods per second
	wiPacedPods   = 1500 // 30 s a run: the p99 is the fifteenth-slowest pod, not one stall
	wiMaxConc     = 16
	wiMaxPods     = 1000
	wiRounds      = 6    // with six loads, each load runs once in each position
	upstreamPort  = 9443 // upstream's webhook listens on all interfaces at this port; no flag changes it
	upstreamBin   = "azure-wi-webhook"
	upstreamLabel = "upstream Azure Workload Identity webhook v1.5.1"
)

// benchWorkloadIdentity measures pod creation through kube-apiserver (labelled pods of an
// annotated service account) with no webhook, with Cerulean's webhook (a controller-runtime
// manager set up as `cerulean manager` sets it up) and with the upstream webhook built from its
// Go module, registered the same way (by URL, failurePolicy Fail, same selector), on the same
// control plane with the same load: paced at 50 pods/s, then as fast as 16 clients go. A no-op
// webhook on Cerulean's server stack and configuration is the floor: what any webhook adds
// (kube-apiserver's call, TLS, the server framework), so that what is left is a handler's own;
// two patch floors on the same stack split that: one label (what any patch costs
// kube-apiserver) and Cerulean's patch computed once (what this patch costs it). Every webhook
// runs as a process of its own, whose CPU time per pod is measured too. Then the exchange of the
// control plane's real service-account tokens at the local Entra ID.
func benchWorkloadIdentity(ctx context.Context, env benchEnv) ([]row, error) {
	upstream := filepath.Join(env.binDir, upstreamBin)
	if _, err := os.Stat(upstream); err != nil {
		return nil, fmt.Errorf("the upstream webhook is not built (make bench builds it: hack/tools/build.sh azure-workload-identity): %w", err)
	}
	dir, err := os.MkdirTemp(env.scratch, "wi-")
	if err != nil {
		return nil, err
	}
	cp, err := devenv.Start(ctx, devenv.Options{DataDir: filepath.Join(dir, "cp"), BinDir: env.binDir, APIServerEnv: apiServerGCEnv})
	if err != nil {
		return nil, err
	}
	defer cp.Stop()
	rc := rest.CopyConfig(cp.RESTConfig)
	rc.QPS, rc.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wiNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := cs.CoreV1().ServiceAccounts(wiNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: "app", Annotations: map[string]string{wi.ClientIDAnnotation: "11111111-2222-3333-4444-555555555555"},
	}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	create := func(ctx context.Context) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Labels: map[string]string{wi.UseLabel: "true"}}}
		p.Spec.ServiceAccountName = "app"
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		_, err := cs.CoreV1().Pods(wiNamespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	apiserver, err := processOf(filepath.Join(env.binDir, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	// apiCPU and webhookCPU are kube-apiserver's and the webhook process's CPU time per pod
	// created in the timed runs: what a webhook's answer costs each, apart from the latency's
	// noise. pacedCollections are kube-apiserver's garbage collections during the paced run.
	type result struct {
		paced, max         benchutil.Result
		apiCPU, webhookCPU time.Duration
		pacedCollections   float64
	}
	// pacedAllocated is the most kube-apiserver allocated in a paced run so far; each paced run
	// starts with room for half as much again (a guess before the first).
	pacedAllocated := float64(512 << 20)
	// measure runs the loads while the webhook process webhook (0: none) serves.
	measure := func(webhook int) (result, error) {
		// Warm up connections and caches, then clear the pods so each run starts alike.
		for range 20 {
			if err := create(ctx); err != nil {
				return result{}, err
			}
		}
		heap, err := roomFor(ctx, cs.CoreV1().RESTClient(), 1.5*pacedAllocated)
		if err != nil {
			return result{}, err
		}
		var r result
		apiCPU, webhookCPU := processCPU(apiserver), processCPU(webhook)
		r.paced = paced(ctx, wiPacedRate, wiPacedPods, create)
		after, err := readAPIServerHeap(ctx, cs.CoreV1().RESTClient())
		if err != nil {
			return result{}, err
		}
		r.pacedCollections = after.collections - heap.collections
		pacedAllocated = max(pacedAllocated, after.allocated-heap.allocated)
		r.max = benchutil.Load(ctx, wiMaxConc, wiMaxPods, 30*time.Second, create)
		if pods := time.Duration(r.paced.Requests + r.max.Requests); pods > 0 {
			r.apiCPU = (processCPU(apiserver) - apiCPU) / pods
			r.webhookCPU = (processCPU(webhook) - webhookCPU) / pods
		}
		if err := cs.CoreV1().Pods(wiNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
			return r, err
		}
		if r.paced.Errors+r.max.Errors > 0 {
			return r, fmt.Errorf("%d pod creations failed", r.paced.Errors+r.max.Errors)
		}
		return r, nil
	}

	// Each load runs in rounds, interleaved, each round in another order: a run's percentiles
	// move by a millisecond from one run to the next on a shared machine (as much as the
	// differences measured), and a p99 with them when a run follows another's cleanup.
	loads := []struct {
		name string
		run  func() (result, error)
	}{
		{"without a webhook", func() (result, error) { return measure(0) }},
		{"with the no-op webhook", func() (result, error) { return withBenchWebhook(ctx, cp, dir, webhookNoop, measure) }},
		{"with the one-label patch floor webhook", func() (result, error) { return withBenchWebhook(ctx, cp, dir, webhookLabelFloor, measure) }},
		{"with the patch floor webhook", func() (result, error) { return withBenchWebhook(ctx, cp, dir, webhookPatchFloor, measure) }},
		{"with Cerulean's webhook", func() (result, error) { return withBenchWebhook(ctx, cp, dir, webhookCerulean, measure) }},
		{"with the upstream webhook", func() (result, error) { return withUpstreamWebhook(ctx, cp, upstream, dir, measure) }},
	}
	runs := make([][]result, len(loads))
	var pacedCollections float64
	// The first run after kube-apiserver starts grows its heap from nothing (a paced p99 of 47 ms
	// without a webhook, 8 to 12 ms after): one run, not counted, warms it up.
	fmt.Fprintln(os.Stderr, "  warming up kube-apiserver (one run without a webhook, not counted)…")
	if _, err := measure(0); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	for round := range wiRounds {
		for k := range loads {
			i := (k + round) % len(loads)
			l := loads[i]
			fmt.Fprintf(os.Stderr, "  round %d of %d, %s…\n", round+1, wiRounds, l.name)
			r, err := l.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
			fmt.Fprintf(os.Stderr, "    paced %s (kube-apiserver's collections: %.0f); flat out %s; CPU a pod: kube-apiserver %.2fms, the webhook %.2fms\n", r.paced, r.pacedCollections, r.max, ms(r.apiCPU), ms(r.webhookCPU))
			runs[i] = append(runs[i], r)
			pacedCollections += r.pacedCollections
		}
	}
	median := func(rs []result) result {
		var paced, fast []benchutil.Result
		var api, hook []time.Duration
		for _, x := range rs {
			paced, fast = append(paced, x.paced), append(fast, x.max)
			api, hook = append(api, x.apiCPU), append(hook, x.webhookCPU)
		}
		return result{paced: benchutil.Median(paced), max: benchutil.Median(fast), apiCPU: medianDuration(api), webhookCPU: medianDuration(hook)}
	}
	base, floor, labelFloor, patchFloor, ours, theirs := median(runs[0]), median(runs[1]), median(runs[2]), median(runs[3]), median(runs[4]), median(runs[5])
	exchange, secret, err := benchFederatedExchange(ctx, env, cp, cs)
	if err != nil {
		return nil, fmt.Errorf("token exchange: %w", err)
	}

	latency := func(r, b benchutil.Result) string {
		return fmt.Sprintf("%s p50, %s p99", ratio(r.P50.Seconds(), b.P50.Seconds()), ratio(r.P99.Seconds(), b.P99.Seconds()))
	}
	pacedName := fmt.Sprintf("pod create at %d pods/s (%d pods)", wiPacedRate, wiPacedPods)
	maxName := fmt.Sprintf("pod create, %d clients as fast as they go (%d pods)", wiMaxConc, wiMaxPods)
	const floorLabel = "no-op webhook (the floor: allowed, no patch, Cerulean's server and configuration)"
	rows := []row{
		{benchmark: pacedName + ", no webhook", result: base.paced.String()},
		{benchmark: pacedName + ", " + floorLabel, result: floor.paced.String(), vsBaseline: latency(floor.paced, base.paced) + " of no webhook"},
		{benchmark: pacedName + ", Cerulean's webhook", result: ours.paced.String(), vsBaseline: latency(ours.paced, base.paced) + " of no webhook"},
		{benchmark: pacedName + ", " + upstreamLabel, result: theirs.paced.String(), vsBaseline: latency(theirs.paced, base.paced) + " of no webhook"},
	}
	rows = append(rows, addedRows(pacedName, base.paced, floor.paced, labelFloor.paced, patchFloor.paced, ours.paced, theirs.paced)...)
	rows = append(rows,
		row{benchmark: maxName + ", no webhook", result: base.max.String()},
		row{benchmark: maxName + ", " + floorLabel, result: floor.max.String(), vsBaseline: ratio(floor.max.RPS(), base.max.RPS()) + " of no-webhook rps"},
		row{benchmark: maxName + ", Cerulean's webhook", result: ours.max.String(), vsBaseline: ratio(ours.max.RPS(), base.max.RPS()) + " of no-webhook rps"},
		row{benchmark: maxName + ", " + upstreamLabel, result: theirs.max.String(), vsBaseline: ratio(theirs.max.RPS(), base.max.RPS()) + " of no-webhook rps"},
		row{benchmark: maxName + ", Cerulean's vs upstream", result: "", vsBaseline: ratio(ours.max.RPS(), theirs.max.RPS()) + " of upstream rps, " + latency(ours.max, theirs.max)},
	)
	rows = append(rows, addedRows(maxName, base.max, floor.max, labelFloor.max, patchFloor.max, ours.max, theirs.max)...)
	cpuName := "kube-apiserver's CPU time per pod created (both loads), "
	cpuOf := func(r, b result) string { return ratio(r.apiCPU.Seconds(), b.apiCPU.Seconds()) }
	rows = append(rows,
		row{benchmark: cpuName + "no webhook", result: fmt.Sprintf("%.2fms", ms(base.apiCPU))},
		row{benchmark: cpuName + "no-op webhook (the floor)", result: fmt.Sprintf("%.2fms", ms(floor.apiCPU)), vsBaseline: cpuOf(floor, base) + " of no webhook"},
		row{benchmark: cpuName + "the one-label patch floor", result: fmt.Sprintf("%.2fms", ms(labelFloor.apiCPU)), vsBaseline: cpuOf(labelFloor, floor) + " of the floor's"},
		row{benchmark: cpuName + "the patch floor", result: fmt.Sprintf("%.2fms", ms(patchFloor.apiCPU)), vsBaseline: cpuOf(patchFloor, floor) + " of the floor's"},
		row{benchmark: cpuName + "Cerulean's webhook", result: fmt.Sprintf("%.2fms", ms(ours.apiCPU)), vsBaseline: cpuOf(ours, floor) + " of the floor's, " + cpuOf(ours, patchFloor) + " of the patch floor's"},
		row{benchmark: cpuName + upstreamLabel, result: fmt.Sprintf("%.2fms", ms(theirs.apiCPU)), vsBaseline: cpuOf(theirs, floor) + " of the floor's"},
	)
	hookName := "the webhook process's own CPU time per pod created (both loads), "
	hookOf := func(r, b result) string { return ratio(r.webhookCPU.Seconds(), b.webhookCPU.Seconds()) }
	rows = append(rows,
		row{benchmark: hookName + "no-op webhook (the floor)", result: fmt.Sprintf("%.3fms", ms(floor.webhookCPU))},
		row{benchmark: hookName + "the one-label patch floor", result: fmt.Sprintf("%.3fms", ms(labelFloor.webhookCPU)), vsBaseline: hookOf(labelFloor, floor) + " of the floor's"},
		row{benchmark: hookName + "the patch floor", result: fmt.Sprintf("%.3fms", ms(patchFloor.webhookCPU)), vsBaseline: hookOf(patchFloor, floor) + " of the floor's"},
		row{benchmark: hookName + "Cerulean's webhook", result: fmt.Sprintf("%.3fms", ms(ours.webhookCPU)), vsBaseline: hookOf(ours, floor) + " of the floor's, " + hookOf(ours, patchFloor) + " of the patch floor's, " + hookOf(ours, theirs) + " of upstream's"},
		row{benchmark: hookName + upstreamLabel, result: fmt.Sprintf("%.3fms", ms(theirs.webhookCPU)), vsBaseline: hookOf(theirs, floor) + " of the floor's"},
	)
	rows = append(rows, row{
		benchmark: fmt.Sprintf("kube-apiserver's garbage collections during the paced runs (%d runs; %s; each started with room for %.0f MiB)", wiRounds*len(loads), strings.Join(apiServerGCEnv, " "), 1.5*pacedAllocated/(1<<20)),
		result:    fmt.Sprintf("%.0f", pacedCollections),
	})
	return append(rows,
		row{benchmark: "client-secret token requests, 8 concurrent (baseline)", result: secret.String()},
		row{benchmark: "federated exchanges of kube-apiserver tokens, 8 concurrent", result: exchange.String(), vsBaseline: ratio(exchange.RPS(), secret.RPS()) + " of secret rps"},
	), nil
}

// addedRows are each webhook's added latency (its percentile minus no webhook's, all from one
// run) and Cerulean's as a ratio of the floor's and of upstream's: the goal is at most 1.1× the
// floor's and below upstream's. The one-label patch floor is what any patch adds in
// kube-apiserver; the patch floor (the same stack answering Cerulean's patch, computed once)
// splits what is left between kube-apiserver's work on this patch and the handler's.
func addedRows(name string, base, floor, labelFloor, patchFloor, ours, theirs benchutil.Result) []row {
	added := func(r benchutil.Result) (p50, p99 time.Duration) { return r.P50 - base.P50, r.P99 - base.P99 }
	show := func(r benchutil.Result) string {
		p50, p99 := added(r)
		return fmt.Sprintf("%+.1fms p50, %+.1fms p99", ms(p50), ms(p99))
	}
	of := func(r, b benchutil.Result) string {
		r50, r99 := added(r)
		b50, b99 := added(b)
		return fmt.Sprintf("%s p50, %s p99", addedRatio(r50, b50), addedRatio(r99, b99))
	}
	name += ", added latency over no webhook"
	return []row{
		{benchmark: name + ": no-op webhook (the floor)", result: show(floor)},
		{benchmark: name + ": the one-label patch floor (the least a webhook that patches does)", result: show(labelFloor), vsBaseline: of(labelFloor, floor) + " of the floor's"},
		{benchmark: name + ": the patch floor (Cerulean's patch, computed once)", result: show(patchFloor), vsBaseline: of(patchFloor, floor) + " of the floor's"},
		{benchmark: name + ": Cerulean's webhook", result: show(ours), vsBaseline: of(ours, floor) + " of the floor's; " + of(ours, patchFloor) + " of the patch floor's; " + of(ours, theirs) + " of upstream's"},
		{benchmark: name + ": " + upstreamLabel, result: show(theirs), vsBaseline: of(theirs, floor) + " of the floor's"},
	}
}

// medianDuration is the middle of ds (the upper middle of an even count); ds is sorted in place.
func medianDuration(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// addedRatio is a/b, or "n/a" when the baseline added nothing measurable (noise made it ≤ 0).
func addedRatio(a, b time.Duration) string {
	if b <= 0 {
		return "n/a"
	}
	return ratio(a.Seconds(), b.Seconds())
}

// paced starts calls at rate per second, each in its own goroutine, until total were started.
func paced(ctx context.Context, rate, total int, fn func(context.Context) error) benchutil.Result {
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      int
		wg        sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	start := time.Now()
	for range total {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		wg.Go(func() {
			t := time.Now()
			err := fn(ctx)
			d := time.Since(t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				return
			}
			latencies = append(latencies, d)
		})
	}
	wg.Wait()
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[int(float64(len(latencies)-1)*p)]
	}
	return benchutil.Result{Concurrency: rate, Requests: len(latencies), Errors: errs, Elapsed: time.Since(start), P50: pct(0.5), P99: pct(0.99)}
}

// withUpstreamWebhook runs fn while the upstream webhook runs as a process with a certificate of
// our own (its cert rotation off), registered by URL exactly as Cerulean's is.
func withUpstreamWebhook[T any](ctx context.Context, cp *devenv.ControlPlane, bin, dir string, fn func(pid int) (T, error)) (T, error) {
	var zero T
	certDir := filepath.Join(dir, "upstream-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return zero, err
	}
	now := time.Now()
	ca, err := pki.NewCA(pkix.Name{CommonName: "bench upstream webhook CA"}, now, 24*time.Hour)
	if err != nil {
		return zero, err
	}
	der, key, err := ca.Issue(x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, now, 24*time.Hour)
	if err != nil {
		return zero, err
	}
	if err := pki.WritePair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"), der, key); err != nil {
		return zero, err
	}
	health, err := freePort()
	if err != nil {
		return zero, err
	}
	metrics, err := freePort()
	if err != nil {
		return zero, err
	}
	c, err := client.New(cp.RESTConfig, client.Options{})
	if err != nil {
		return zero, err
	}
	if err := wi.Apply(ctx, c, registration.ClientConfig{URL: "https://127.0.0.1:" + strconv.Itoa(upstreamPort), CABundle: ca.PEM()}); err != nil {
		return zero, err
	}
	cmd := exec.CommandContext(ctx, bin, "--webhook-cert-dir", certDir, "--disable-cert-rotation",
		"--health-addr", "127.0.0.1:"+strconv.Itoa(health), "--metrics-addr", "127.0.0.1:"+strconv.Itoa(metrics))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig, "AZURE_TENANT_ID="+ceruleanTenant,
		"AZURE_ENVIRONMENT=AzurePublicCloud", "POD_NAMESPACE="+wiNamespace)
	return withWebhookProcess(ctx, cp, cmd, filepath.Join(dir, "upstream-webhook.log"), mutatesForWorkloadIdentity, fn)
}

// benchFederatedExchange exchanges real kube-apiserver service-account tokens at the local
// Entra ID (the issuer's keys fetched over HTTPS once, then cached), against client-secret
// requests as the baseline. Raw POSTs: an SDK would cache the token and measure nothing.
func benchFederatedExchange(ctx context.Context, env benchEnv, cp *devenv.ControlPlane, cs *kubernetes.Clientset) (exchange, secret benchutil.Result, err error) {
	c, err := startCloud(ctx, env, "cloud-wi", cloud.Options{TrustCAs: [][]byte{cp.CACertPEM}})
	if err != nil {
		return exchange, secret, err
	}
	defer c.Close()
	s := c.Settings()
	mi, err := c.Entra().Directory.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindManagedIdentity, DisplayName: "bench-wi"})
	if err != nil {
		return exchange, secret, err
	}
	subject := "system:serviceaccount:" + wiNamespace + ":app"
	if _, err := c.Entra().Directory.PutFederatedCredential(ctx, s.TenantID, mi.ClientID, entra.FederatedCredential{
		Name: "bench", Issuer: cp.IssuerURL, Subject: subject, Audiences: []string{wi.DefaultAudience}}); err != nil {
		return exchange, secret, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(wiNamespace).CreateToken(ctx, "app", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{wi.DefaultAudience}}}, metav1.CreateOptions{})
	if err != nil {
		return exchange, secret, fmt.Errorf("request a service-account token: %w", err)
	}
	scope := "https://management.core.windows.net//.default"
	secretForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.ClientID}, "client_secret": {s.ClientSecret}, "scope": {scope}}.Encode()
	fedForm := url.Values{"grant_type": {"client_credentials"}, "client_id": {mi.ClientID}, "scope": {scope},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {tr.Status.Token}}.Encode()
	hc, transport := loadClient(c)
	defer transport.CloseIdleConnections()
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"
	post := func(form string) func(context.Context) error {
		return func(ctx context.Context) error {
			status, err := send(ctx, hc, http.MethodPost, tokenURL, form, map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
			if err != nil {
				return err
			}
			if status != http.StatusOK {
				return fmt.Errorf("token endpoint answered %d", status)
			}
			return nil
		}
	}
	for _, f := range []string{secretForm, fedForm} {
		if err := post(f)(ctx); err != nil {
			return exchange, secret, fmt.Errorf("warm up: %w", err)
		}
	}
	secret = benchutil.Load(ctx, 8, 2000, 20*time.Second, post(secretForm))
	exchange = benchutil.Load(ctx, 8, 2000, 20*time.Second, post(fedForm))
	return exchange, secret, nil
}
