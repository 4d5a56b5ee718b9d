package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/proxy"
	"github.com/cerulean/cerulean/internal/pki"
)

// logBuffer collects the proxy's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	p    *proxy.Proxy
	ca   *pki.CA
	pool *x509.CertPool
	log  *logBuffer
}

// start runs a proxy whose every served name answers with the host and protocol it saw.
func start(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"), pkix.Name{CommonName: "test CA"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lb := &logBuffer{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Host, r.Proto, r.URL.Path)
	})
	p, err := proxy.Start(proxy.Options{
		Addr: "127.0.0.1:0", CA: ca, Logger: slog.New(slog.NewTextHandler(lb, nil)),
		HTTP1Only: func(host string) bool { return strings.HasSuffix(host, ".blob.core.windows.net") },
		Route: func(_ context.Context, host string) (http.Handler, error) {
			if host == "gone.vault.azure.net" {
				return nil, proxy.ErrNotServed
			}
			return h, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &env{p: p, ca: ca, pool: pool, log: lb}
}

// client is an HTTP client that uses the proxy and trusts only the CA.
func (e *env) client(h2 bool) *http.Client {
	u, _ := url.Parse(e.p.URL())
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// TestServesPublicNames: a client with only the proxy and the CA reaches each public name, over
// HTTP/2 and HTTP/1.1, and the handler sees the name the client used.
func TestServesPublicNames(t *testing.T) {
	e := start(t)
	for _, h2 := range []bool{true, false} {
		c := e.client(h2)
		for _, host := range []string{"login.microsoftonline.com", "login.windows.net", "sts.windows.net", "management.azure.com", "management.core.windows.net", "myvault.vault.azure.net"} {
			res, err := c.Get("https://" + host + "/x")
			if err != nil {
				t.Fatalf("GET %s (h2 %v): %v", host, h2, err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			wantProto := "HTTP/1.1"
			if h2 {
				wantProto = "HTTP/2.0"
			}
			if want := host + " " + wantProto + " /x"; res.StatusCode != 200 || string(b) != want {
				t.Errorf("GET %s: %d %q, want %q", host, res.StatusCode, b, want)
			}
		}
	}
}

// TestHTTP1OnlyHosts: a host the cloud marks HTTP/1.1-only (a storage data plane, as Azure
// Storage is) answers a client that offers h2 over HTTP/1.1, through CONNECT and through the
// cloud's DNS (ServeTLS); every other name still negotiates HTTP/2.
func TestHTTP1OnlyHosts(t *testing.T) {
	e := start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.p.ServeTLS(ln)
	direct := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: e.pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
		},
	}
	clients := map[string]*http.Client{"CONNECT": e.client(true), "ServeTLS": {Transport: direct, Timeout: time.Minute}}
	for via, c := range clients {
		for host, want := range map[string]string{"stdata.blob.core.windows.net": "HTTP/1.1", "management.azure.com": "HTTP/2.0"} {
			res, err := c.Get("https://" + host + "/x")
			if err != nil {
				t.Fatalf("GET %s via %s: %v", host, via, err)
			}
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if res.Proto != want || string(b) != host+" "+want+" /x" {
				t.Errorf("GET %s via %s: %s %q, want %s", host, via, res.Proto, b, want)
			}
		}
	}
}

// countingListener is a loopback listener that counts the connections it accepts.
func countingListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// connect sends a raw CONNECT and returns the status line's code.
func connect(t *testing.T, proxyAddr, target string) int {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestRefusesOtherHosts: CONNECT to anything that is not one of Azure's served names (another
// host, a loopback listener by address or by name, a served name on another port, a vault the
// route does not know) is 403, logged with the host, and no connection is made anywhere.
func TestRefusesOtherHosts(t *testing.T) {
	e := start(t)
	addr, accepted := countingListener(t)
	_, port, _ := net.SplitHostPort(addr)
	for _, target := range []string{
		addr, "localhost:" + port, "example.com:443", "login.microsoftonline.com.evil.example:443",
		"management.azure.com:" + port, "gone.vault.azure.net:443", "a.b.vault.azure.net:443", "[::1]:" + port,
	} {
		if got := connect(t, e.p.Addr(), target); got != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d, want 403", target, got)
		}
	}
	// Through a real client too: the request fails, the listener sees nothing.
	if _, err := e.client(true).Get("https://example.com/"); err == nil {
		t.Error("GET https://example.com through the proxy succeeded")
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the loopback listener accepted %d connections, want 0", n)
	}
	if !strings.Contains(e.log.String(), "Proxy refused CONNECT") || !strings.Contains(e.log.String(), "host=example.com") {
		t.Errorf("no log line names the refused host:\n%s", e.log.String())
	}
}

// TestRefusesPlainHTTP: a plain-HTTP proxy request (absolute URL, no CONNECT) is 403 and goes
// nowhere, even for a served name.
func TestRefusesPlainHTTP(t *testing.T) {
	e := start(t)
	addr, accepted := countingListener(t)
	u, _ := url.Parse(e.p.URL())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
	for _, target := range []string{"http://" + addr + "/", "http://management.azure.com/subscriptions"} {
		res, err := c.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s through the proxy: %d, want 403", target, res.StatusCode)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the loopback listener accepted %d connections, want 0", n)
	}
	if !strings.Contains(e.log.String(), "Proxy refused a request that is not CONNECT") {
		t.Errorf("no log line for the plain-HTTP request:\n%s", e.log.String())
	}
}

// TestCertificatesOnlyForListedNames: a leaf is issued only for Azure's served names, names
// exactly the host asked for, chains to the CA, and is cached; a TLS handshake whose server
// name is not the CONNECT target gets no certificate.
func TestCertificatesOnlyForListedNames(t *testing.T) {
	e := start(t)
	for _, host := range []string{"example.com", "localhost", "127.0.0.1", "vault.azure.net", "x.management.azure.com", "evil.example"} {
		if _, err := e.p.Certificate(host); !errors.Is(err, proxy.ErrNotServed) {
			t.Errorf("Certificate(%q): %v, want ErrNotServed", host, err)
		}
	}
	for _, host := range []string{"login.microsoftonline.com", "management.azure.com", "kv1.vault.azure.net"} {
		c, err := e.p.Certificate(host)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Leaf.DNSNames) != 1 || c.Leaf.DNSNames[0] != host || len(c.Leaf.IPAddresses) != 0 || c.Leaf.IsCA {
			t.Errorf("%s: leaf names %v %v (CA %v)", host, c.Leaf.DNSNames, c.Leaf.IPAddresses, c.Leaf.IsCA)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: e.pool}); err != nil {
			t.Errorf("%s: leaf does not verify: %v", host, err)
		}
		if again, _ := e.p.Certificate(host); again != c {
			t.Errorf("%s: a second leaf was issued instead of the cached one", host)
		}
	}
	// A tunnel to management.azure.com asked, in its handshake, for another name.
	conn, err := net.Dial("tcp", e.p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "CONNECT management.azure.com:443 HTTP/1.1\r\nHost: management.azure.com:443\r\n\r\n")
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: "evil.example", RootCAs: e.pool, MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err == nil {
		t.Error("handshake for evil.example through a management.azure.com tunnel succeeded")
	}
}

// TestMisdirectedRequest: a request inside a tunnel for another name than the tunnel's is 421,
// so a client opens a tunnel (and gets a certificate) of that name's own.
func TestMisdirectedRequest(t *testing.T) {
	e := start(t)
	conn, err := net.Dial("tcp", e.p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "CONNECT management.azure.com:443 HTTP/1.1\r\nHost: management.azure.com:443\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: "management.azure.com", RootCAs: e.pool, MinVersion: tls.VersionTLS12})
	fmt.Fprint(tc, "GET /x HTTP/1.1\r\nHost: login.microsoftonline.com\r\n\r\n")
	res, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("request for login.microsoftonline.com in a management.azure.com tunnel: %d, want 421", res.StatusCode)
	}
}
