// Package nodeagent is the node agent (aad-pod-identity's NMI): on one node it answers pods'
// IMDS token requests with a token of the identity bound to the pod, found by the request's
// source IP, and installs the iptables rules that send pods' IMDS traffic to it.
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
)

// Options configure the node agent.
type Options struct {
	// NodeName is the node the agent serves; only its pods get tokens.
	NodeName string
	// Config reaches kube-apiserver.
	Config *rest.Config
	// Listen is the address served, e.g. 0.0.0.0:2579.
	Listen string
	// NodeIP is the DNAT target: a local address pods reach; the port is Listen's.
	NodeIP net.IP
	// PodInterfaces are the interfaces pods' traffic arrives on: names, or prefixes ending in
	// '+' as iptables -i takes them (cni0, veth+). Empty means no DNAT rules are installed.
	PodInterfaces []string
	// Table is the agent's own nftables table (default cerulean-node-agent).
	Table string
	// KeepRulesOnExit leaves the DNAT rules in place when Run returns: until the next agent
	// replaces them, pods' IMDS requests are refused instead of reaching the node's IMDS, which
	// would answer any pod with the node's identities (an agent's restart or upgrade).
	KeepRulesOnExit bool
	// Tokens gets tokens from the node's managed-identity endpoint.
	Tokens Source
	// Entra configures the client-credentials requests of service-principal AzureIdentities
	// (types 1 and 2): Cloud.ActiveDirectoryAuthorityHost (empty: Azure's public cloud; an
	// identity's adEndpoint wins) and the Transport (trusting the authority's CA). The agent
	// reads those identities' clientPassword Secrets: it needs get on them.
	Entra azcore.ClientOptions
	// IMDS is the node's instance-metadata endpoint that requests outside the token path, and
	// exception pods' requests, are proxied to.
	IMDS *url.URL
	// IMDSHeader is the identity header added to exception pods' token requests (local cloud).
	IMDSHeader string
	// IMDSTransport reaches IMDS; nil means http.DefaultTransport.
	IMDSTransport http.RoundTripper
	// AssignWait bounds the wait for an identity not yet Assigned (default 20s).
	AssignWait time.Duration
	// PodWait bounds the wait for an unknown source address to become a pod of the node: a
	// pod's first request can come before the kubelet writes its address (default 5s).
	PodWait time.Duration
	// SyncPeriod is how often the DNAT rules are checked and re-created (default 10s).
	SyncPeriod time.Duration
	// FlushPeriod is how often aggregated audit Events are written (default 5s).
	FlushPeriod time.Duration
	// MetricsAddr, when set, is where the agent serves its Prometheus metrics (/metrics):
	// aad-pod-identity's NMI series, on a registry of the agent's own.
	MetricsAddr string
	// Clock is the time source (time.Now when nil).
	Clock func() time.Time
	// Logger receives the agent's logs (slog.Default when nil).
	Logger *slog.Logger
}

// Agent is a node agent.
type Agent struct {
	o       Options
	log     *slog.Logger
	cache   cache.Cache
	reader  client.Reader
	tokens  *Cache
	audit   *Auditor
	rules   *redirect
	ln      net.Listener
	proxy   *httputil.ReverseProxy
	forward *httputil.ReverseProxy
	local   func(net.IP) bool
	metrics *metrics
	metln   net.Listener // nil without MetricsAddr
}

const (
	indexPodIP        = "status.podIP"
	indexAssignedPod  = "spec.podNamespace/pod"
	defaultAssignWait = 20 * time.Second
	defaultPodWait    = 5 * time.Second
)

// setDefaults fills in what the options leave out.
func (o *Options) setDefaults() {
	if o.AssignWait <= 0 {
		o.AssignWait = defaultAssignWait
	}
	if o.PodWait <= 0 {
		o.PodWait = defaultPodWait
	}
	if o.SyncPeriod <= 0 {
		o.SyncPeriod = 10 * time.Second
	}
	if o.FlushPeriod <= 0 {
		o.FlushPeriod = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// New prepares an agent: it listens on o.Listen and builds its informers; Run starts them.
func New(o Options) (*Agent, error) {
	if o.NodeName == "" || o.Config == nil || o.Tokens == nil || o.IMDS == nil {
		return nil, errors.New("create node agent: node name, kube config, token source and IMDS endpoint are required")
	}
	o.setDefaults()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	if err := aadv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	c, err := cache.New(o.Config, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", o.NodeName)},
	}})
	if err != nil {
		return nil, fmt.Errorf("create informers: %w", err)
	}
	ctx := context.Background()
	if err := c.IndexField(ctx, &corev1.Pod{}, indexPodIP, func(obj client.Object) []string {
		p := obj.(*corev1.Pod)
		var ips []string
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
		return ips
	}); err != nil {
		return nil, fmt.Errorf("index pods: %w", err)
	}
	if err := c.IndexField(ctx, &aadv1.AzureAssignedIdentity{}, indexAssignedPod, func(obj client.Object) []string {
		a := obj.(*aadv1.AzureAssignedIdentity)
		return []string{a.Spec.PodNamespace + "/" + a.Spec.Pod}
	}); err != nil {
		return nil, fmt.Errorf("index assigned identities: %w", err)
	}
	writer, err := client.New(o.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	m := newMetrics()
	src := sources{msi: o.Tokens, sp: &spSource{secrets: writer, opts: o.Entra, now: o.Clock, metrics: m}, metrics: m}
	a := &Agent{o: o, log: o.Logger, cache: c, reader: c, tokens: NewCache(src, o.Clock),
		audit: newAuditor(writer, o.NodeName, o.Clock), ln: ln, local: isLocalAddress, metrics: m}
	if len(o.PodInterfaces) > 0 {
		if a.rules, err = newRedirect(o.Table, o.PodInterfaces, o.NodeIP, ln.Addr().(*net.TCPAddr).Port); err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	if o.MetricsAddr != "" {
		if a.metln, err = net.Listen("tcp", o.MetricsAddr); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("listen for metrics on %s: %w", o.MetricsAddr, err)
		}
	}
	imds := o.IMDS
	a.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(imds)
			r.Out.Host = imds.Host
			r.Out.Header.Del(IdentityHeaderName)
		},
		Transport: o.IMDSTransport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			a.log.ErrorContext(r.Context(), "Proxy to IMDS failed", "path", r.URL.Path, "err", err)
			writeIMDSError(w, http.StatusBadGateway, "bad_gateway", "The node's instance-metadata endpoint is unreachable.")
		},
	}
	a.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(imds)
			r.Out.Host = imds.Host
		},
		Transport:    o.IMDSTransport,
		ErrorHandler: a.proxy.ErrorHandler,
	}
	return a, nil
}

// Addr is the address the agent serves on.
func (a *Agent) Addr() string { return a.ln.Addr().String() }

// Port is the port the agent serves on.
func (a *Agent) Port() int { return a.ln.Addr().(*net.TCPAddr).Port }

// MetricsAddr is the address the agent serves its metrics on; "" without Options.MetricsAddr.
func (a *Agent) MetricsAddr() string {
	if a.metln == nil {
		return ""
	}
	return a.metln.Addr().String()
}

// MetricsHandler serves the agent's metrics in Prometheus' format (what MetricsAddr serves at
// /metrics), for a process that embeds the agent and serves it itself.
func (a *Agent) MetricsHandler() http.Handler { return a.metrics.handler() }

// Tokens is the agent's token cache (its counters are read by tests and benchmarks).
func (a *Agent) Tokens() *Cache { return a.tokens }

// FlushAudit writes the aggregated audit Events now.
func (a *Agent) FlushAudit(ctx context.Context) error { return a.audit.Flush(ctx) }

// Run serves until ctx ends; on a clean exit it removes its DNAT rules and flushes audit.
func (a *Agent) Run(ctx context.Context) error {
	cacheCtx, stopCache := context.WithCancel(ctx)
	defer stopCache()
	cacheErr := make(chan error, 1)
	go func() { cacheErr <- a.cache.Start(cacheCtx) }()
	for _, obj := range []client.Object{&corev1.Pod{}, &aadv1.AzureAssignedIdentity{}, &aadv1.AzureIdentityBinding{},
		&aadv1.AzureIdentity{}, &aadv1.AzurePodIdentityException{}} {
		if _, err := a.cache.GetInformer(ctx, obj); err != nil {
			a.closeListeners()
			return fmt.Errorf("start informer: %w", err)
		}
	}
	if !a.cache.WaitForCacheSync(ctx) {
		a.closeListeners()
		return fmt.Errorf("sync informers: %w", ctx.Err())
	}
	if a.rules != nil {
		// The table is the agent's own: what a killed agent left in it is replaced.
		if err := a.rules.Install(); err != nil {
			a.closeListeners()
			return fmt.Errorf("install DNAT rules: %w", err)
		}
		if !a.o.KeepRulesOnExit {
			defer func() {
				if err := a.rules.Remove(); err != nil {
					a.log.Error("Removing DNAT rules failed", "err", err)
				}
			}()
		}
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 2) // the agent's server and the metrics server
	go func() { served <- srv.Serve(a.ln) }()
	if a.metln != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", a.MetricsHandler())
		msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { served <- msrv.Serve(a.metln) }()
		defer func() { _ = msrv.Close() }()
	}
	a.log.InfoContext(ctx, "Node agent serving", "addr", a.Addr(), "node", a.o.NodeName)

	sync := time.NewTicker(a.o.SyncPeriod)
	defer sync.Stop()
	flush := time.NewTicker(a.o.FlushPeriod)
	defer flush.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-served:
			break loop
		case err = <-cacheErr:
			if err == nil && ctx.Err() == nil { // the informers stop with ctx: no error then
				err = errors.New("informers stopped")
			}
			break loop
		case <-sync.C:
			if a.rules == nil {
				continue
			}
			if changed, err := a.rules.Ensure(); err != nil {
				a.log.ErrorContext(ctx, "Checking DNAT rules failed", "err", err)
			} else if changed {
				a.log.InfoContext(ctx, "Re-created missing DNAT rules", "table", a.rules.table)
			}
		case <-flush.C:
			if err := a.audit.Flush(ctx); err != nil {
				a.log.ErrorContext(ctx, "Writing audit events failed", "err", err)
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if ferr := a.audit.Flush(sctx); ferr != nil {
		a.log.Error("Writing audit events failed", "err", ferr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func (a *Agent) closeListeners() {
	_ = a.ln.Close()
	if a.metln != nil {
		_ = a.metln.Close()
	}
}

// isLocalAddress reports whether ip is an address of this host (a host-network caller).
func isLocalAddress(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
