// Package proxy is the local cloud's forward proxy: through it, clients that only know Azure's
// public names (login.microsoftonline.com, management.azure.com, NAME.vault.azure.net) reach the
// local cloud unchanged, with HTTPS_PROXY and the cloud's CA as their only settings.
//
// It accepts HTTP CONNECT for the names its Route serves, answers the tunnel itself with a leaf
// certificate the cloud's CA issues for exactly that name (on first use, then cached), and
// hands the decrypted connection to the cloud's in-process handlers. It never dials anything and
// never resolves a name: a name it does not serve is refused with 403 and a log line, and so is
// any request that is not a CONNECT (a plain-HTTP proxy request).
package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/pki"
)

// DefaultLeafValidity is how long an issued leaf is valid; it is issued again when less than a
// tenth of that is left.
const DefaultLeafValidity = 24 * time.Hour

// ErrNotServed is what a Route returns for a host the cloud does not answer under.
var ErrNotServed = errors.New("host not served by the local cloud")

// Route returns the in-process handler that serves host (canonical: lower case, no port), or
// an error wrapping ErrNotServed.
type Route func(ctx context.Context, host string) (http.Handler, error)

// Options configure a proxy.
type Options struct {
	Addr string // listen address, e.g. 127.0.0.1:8444; port 0 picks a free port
	CA   *pki.CA
	// Allowed are the names a certificate may ever be issued for (azurenames.Allowed when nil).
	Allowed func(host string) bool
	Route   Route
	// HTTP1Only names the hosts whose TLS offers only http/1.1, as their Azure service does
	// (the storage data planes); nil: every host offers h2 too.
	HTTP1Only    func(host string) bool
	LeafValidity time.Duration // 0 = DefaultLeafValidity
	Clock        func() time.Time
	Logger       *slog.Logger // never receives request paths, bodies or headers
}

// Proxy is a running proxy.
type Proxy struct {
	o      Options
	log    *slog.Logger
	ln     net.Listener
	front  *http.Server // CONNECT requests
	back   *http.Server // the terminated TLS connections
	direct *http.Server // TLS straight from clients that resolved a public name to us (ServeTLS)
	tuns   *tunnelListener

	frontDone, backDone chan error
	inflight            httpx.InFlight

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
	routes sync.Map // *tls.Conn → tunnel, until the back server picks the connection up
}

// tunnel is what a CONNECT established: the name asked for and the handler serving it.
type tunnel struct {
	host    string
	handler http.Handler
}

type tunnelKey struct{}

// Start listens on opts.Addr and serves until Close.
func Start(opts Options) (*Proxy, error) {
	if opts.CA == nil || opts.Route == nil {
		return nil, errors.New("proxy: CA and Route are required")
	}
	if opts.Allowed == nil {
		opts.Allowed = azurenames.Allowed
	}
	if opts.LeafValidity <= 0 {
		opts.LeafValidity = DefaultLeafValidity
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	p := &Proxy{
		o: opts, log: opts.Logger, ln: ln, leaves: map[string]*tls.Certificate{},
		tuns:      &tunnelListener{ch: make(chan net.Conn), done: make(chan struct{}), addr: ln.Addr()},
		frontDone: make(chan error, 1), backDone: make(chan error, 1),
	}
	errLog := slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)
	p.front = &http.Server{
		Handler:           http.HandlerFunc(p.serveProxy),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errLog,
	}
	p.back = &http.Server{
		// No TLSConfig: Serve then offers HTTP/2 on the *tls.Conn it accepts (the handshake
		// negotiated h2 or http/1.1 with the tunnel's own configuration).
		Handler:           p.inflight.Wrap(http.HandlerFunc(p.serveTunnel)),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if t, ok := p.routes.LoadAndDelete(c); ok {
				return context.WithValue(ctx, tunnelKey{}, t)
			}
			return ctx
		},
	}
	p.direct = &http.Server{
		Handler: p.inflight.Wrap(http.HandlerFunc(p.serveDirect)),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"h2", "http/1.1"},
			GetCertificate: p.directCertificate,
			GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				if !p.http1Only(azurenames.Host(hello.ServerName)) {
					return nil, nil
				}
				return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: http1, GetCertificate: p.directCertificate}, nil
			},
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errLog,
	}
	go func() { p.frontDone <- p.front.Serve(ln) }()
	go func() { p.backDone <- p.back.Serve(p.tuns) }()
	return p, nil
}

// ServeTLS serves HTTPS on ln until Close (which closes ln): for clients that reach the cloud
// by resolving Azure's public names to ln's address (the cloud's DNS) rather than through
// CONNECT. The name a client sends in SNI picks both the certificate and the handler.
func (p *Proxy) ServeTLS(ln net.Listener) {
	go func() { _ = p.direct.ServeTLS(ln, "", "") }() // returns ErrServerClosed at Close
}

// directCertificate is the certificate of the name a client asked for in SNI, when the cloud
// serves that name now; a handshake without SNI, or for another name, fails.
func (p *Proxy) directCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	host := azurenames.Host(hello.ServerName)
	if host == "" {
		return nil, errors.New("no server name (SNI) given: the local cloud serves HTTPS by name")
	}
	if _, err := p.route(hello.Context(), host); err != nil {
		return nil, fmt.Errorf("server name %q: %w", clip(host, 300), err)
	}
	return p.Certificate(host)
}

// serveDirect serves a request of ServeTLS with the handler of the connection's name; a
// request for another name than SNI's (a client reusing a connection) is 421, as in a tunnel.
func (p *Proxy) serveDirect(w http.ResponseWriter, r *http.Request) {
	host := azurenames.Host(r.TLS.ServerName)
	if azurenames.Host(r.Host) != host {
		w.Header().Set("Connection", "close")
		http.Error(w, "Misdirected request: this connection serves "+host, http.StatusMisdirectedRequest)
		return
	}
	h, err := p.route(r.Context(), host)
	if err != nil { // deleted since the handshake
		w.Header().Set("Connection", "close")
		http.Error(w, "Misdirected request: the Cerulean local cloud no longer serves "+clip(host, 300), http.StatusMisdirectedRequest)
		return
	}
	h.ServeHTTP(w, r)
}

// ServeAlso accepts CONNECT requests on ln too, until Close (which closes ln): the same
// proxy on a second address, such as a node's address that pods reach.
func (p *Proxy) ServeAlso(ln net.Listener) {
	go func() { _ = p.front.Serve(ln) }() // returns ErrServerClosed at Close
}

// ListenAddr is the address the proxy listens on.
func (p *Proxy) ListenAddr() net.Addr { return p.ln.Addr() }

// Addr is the address the proxy listens on (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's URL, the value of HTTPS_PROXY.
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Close stops accepting, waits for the requests in flight and closes every tunnel.
func (p *Proxy) Close(ctx context.Context) error {
	err := p.front.Shutdown(ctx)
	if ferr := <-p.frontDone; ferr != nil && !errors.Is(ferr, http.ErrServerClosed) {
		err = errors.Join(err, ferr)
	}
	err = errors.Join(err, p.direct.Shutdown(ctx))
	err = errors.Join(err, httpx.Shutdown(ctx, p.back, &p.inflight))
	if berr := <-p.backDone; berr != nil && !errors.Is(berr, http.ErrServerClosed) {
		err = errors.Join(err, berr)
	}
	return err
}

// serveProxy answers the proxy's own requests: CONNECT to a served name, nothing else.
func (p *Proxy) serveProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		// A plain-HTTP proxy request (or any other): never forwarded. Only the host is logged;
		// the URL may carry secrets in its query.
		p.log.WarnContext(r.Context(), "Proxy refused a request that is not CONNECT", "method", r.Method, "host", azurenames.Host(r.Host))
		refuse(w, "Only CONNECT to Azure's public host names is served by the Cerulean local cloud's proxy.")
		return
	}
	host, port, err := net.SplitHostPort(r.Host)
	host = azurenames.Host(host)
	if err != nil || port != "443" {
		p.log.WarnContext(r.Context(), "Proxy refused CONNECT", "target", clip(r.Host, 300), "reason", "not port 443")
		refuse(w, "Only port 443 is served.")
		return
	}
	h, err := p.route(r.Context(), host)
	if err != nil {
		p.log.WarnContext(r.Context(), "Proxy refused CONNECT", "host", clip(host, 300), "reason", err.Error())
		refuse(w, fmt.Sprintf("The Cerulean local cloud does not serve %s.", clip(host, 300)))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		p.log.ErrorContext(r.Context(), "Hijacking a CONNECT failed", "err", err)
		return
	}
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = conn.Close()
		return
	}
	raw := conn
	if n := brw.Reader.Buffered(); n > 0 {
		raw = &bufferedConn{Conn: conn, r: brw.Reader} // a ClientHello sent with the CONNECT
	}
	protos := []string{"h2", "http/1.1"}
	if p.http1Only(host) {
		protos = http1
	}
	tc := tls.Server(raw, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" && azurenames.Host(hello.ServerName) != host {
				return nil, fmt.Errorf("server name %q is not the CONNECT target %q", clip(hello.ServerName, 300), host)
			}
			return p.Certificate(host)
		},
	})
	p.routes.Store(tc, tunnel{host: host, handler: h})
	if !p.tuns.push(tc) {
		p.routes.Delete(tc)
	}
	p.log.DebugContext(r.Context(), "Proxy tunnel open", "host", host)
}

// http1 is the ALPN list of an HTTP1Only host. Besides matching Azure, HTTP/1.1 carries a
// blob's bytes with far fewer goroutine hand-offs and writes than Go's HTTP/2 server (issue
// 23: through the front at 0.4–0.55× of Azurite directly with h2).
var http1 = []string{"http/1.1"}

func (p *Proxy) http1Only(host string) bool { return p.o.HTTP1Only != nil && p.o.HTTP1Only(host) }

func (p *Proxy) route(ctx context.Context, host string) (http.Handler, error) {
	if !p.o.Allowed(host) {
		return nil, ErrNotServed
	}
	h, err := p.o.Route(ctx, host)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// serveTunnel serves one request of a terminated tunnel with the handler of its name. A
// request for another name than the tunnel's (a client reusing a connection) is 421, so a
// client learns to open a tunnel of its own for it.
func (p *Proxy) serveTunnel(w http.ResponseWriter, r *http.Request) {
	t, ok := r.Context().Value(tunnelKey{}).(tunnel)
	if !ok {
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	if azurenames.Host(r.Host) != t.host {
		w.Header().Set("Connection", "close")
		http.Error(w, "Misdirected request: this connection serves "+t.host, http.StatusMisdirectedRequest)
		return
	}
	t.handler.ServeHTTP(w, r)
}

// Certificate returns the leaf for host, issuing it with the cloud's CA on first use or when
// it nears its end. It refuses any name that is not Allowed, whatever asks.
func (p *Proxy) Certificate(host string) (*tls.Certificate, error) {
	host = azurenames.Host(host)
	if !p.o.Allowed(host) {
		return nil, fmt.Errorf("issue certificate for %q: %w", clip(host, 300), ErrNotServed)
	}
	now := p.o.Clock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.leaves[host]; ok && c.Leaf.NotAfter.Sub(now) > p.o.LeafValidity/10 {
		return c, nil
	}
	der, key, err := p.o.CA.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: host, Organization: []string{"Cerulean"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{host},
	}, now, p.o.LeafValidity)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, p.o.CA.Cert.Raw}, PrivateKey: key, Leaf: leaf}
	p.leaves[host] = c
	p.log.Info("Proxy issued a certificate", "host", host, "notAfter", leaf.NotAfter)
	return c, nil
}

// refuse answers 403 in plain text, as a proxy does.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, http.StatusForbidden)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return strings.ToValidUTF8(s, "?")
}

// bufferedConn reads what the CONNECT's reader already buffered before the connection itself.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) {
	if b.r.Buffered() > 0 {
		return b.r.Read(p)
	}
	return b.Conn.Read(p)
}

// tunnelListener hands terminated tunnels to the back server.
type tunnelListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func (l *tunnelListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		_ = c.Close()
		return false
	}
}

func (l *tunnelListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tunnelListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *tunnelListener) Addr() net.Addr { return l.addr }
