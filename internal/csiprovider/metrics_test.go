package csiprovider_test

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/metricstest"
)

// After real mounts, the provider's metrics endpoint has the upstream provider's series with
// its labels: a Key Vault GET per object fetched (Key Vault's error code on a failure), a gRPC
// call per Mount by status code. No secret value appears.
func TestMetricsAfterMounts(t *testing.T) {
	e := newEnv(t, 0) // no cache: every mount reads Key Vault
	id := e.identity(t, "metrics")
	e.federate(t, "metrics", "default", "metrics")
	e.assign(t, e.vaultID, roleSecretsUser, *id.Properties.PrincipalID)
	e.setSecret(t, "metrics-secret", "m3trics-value")
	srv := httptest.NewServer(csiprovider.MetricsHandler())
	t.Cleanup(srv.Close)

	const (
		mount   = `grpc_method="/v1alpha1.CSIDriverProvider/Mount"`
		upstrm  = `os_type="linux",provider="azure"`
		secret  = `object_type="secret"`
		present = `object_name="metrics-secret"`
		absent  = `object_name="metrics-absent"`
	)
	before := scrape(t, srv.URL)
	params := func(objs string) map[string]string {
		return map[string]string{"clientID": *id.Properties.ClientID, csiprovider.AttrSATokens: e.saTokens(t, "default", "metrics"), "objects": objs}
	}
	for i := range 2 {
		if _, err := e.mount(t, e.request(t, params(objects("objectName: metrics-secret")), "metrics-"+strconv.Itoa(i), nil)); err != nil {
			t.Fatalf("mount: %v", err)
		}
	}
	_, err := e.mount(t, e.request(t, params(objects("objectName: metrics-absent")), "metrics-2", nil))
	wantStatus(t, err, codes.NotFound, "SecretNotFound")
	after := scrape(t, srv.URL)

	for _, c := range []struct {
		series string
		labels []string
		want   float64
	}{
		{"keyvault_request_count", []string{`error=""`, present, secret}, 2},
		{"keyvault_request_count", []string{`error="SecretNotFound"`, absent, secret}, 1},
		{"grpc_request_count", []string{`grpc_code="OK"`, mount}, 2},
		{"grpc_request_count", []string{`grpc_code="NotFound"`, mount}, 1},
	} {
		labels := append(c.labels, strings.Split(upstrm, ",")...)
		if got := metricstest.Sum(after, c.series, labels...) - metricstest.Sum(before, c.series, labels...); got != c.want {
			t.Errorf("%s%v grew by %v, want %v\n%s", c.series, c.labels, got, c.want, after)
		}
	}
	for _, h := range []string{"keyvault_request", "grpc_request"} {
		if !strings.Contains(after, "# TYPE "+h+" histogram") {
			t.Errorf("%s is not a histogram", h)
		}
	}
	if strings.Contains(after, "m3trics-value") {
		t.Error("the metrics hold a secret's value")
	}
}

// Run serves /metrics on Options.MetricsAddr, where `cerulean csi-provider --metrics-addr` puts
// it, with the gRPC calls the driver made on the socket.
func TestRunServesMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	sock := filepath.Join(t.TempDir(), "azure.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- csiprovider.Run(ctx, csiprovider.Options{MetricsAddr: addr, Logger: slog.New(slog.DiscardHandler)}, sock)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var conn *grpc.ClientConn
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err = os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const version = `grpc_request_count{grpc_code="OK",grpc_message="",grpc_method="/v1alpha1.CSIDriverProvider/Version",os_type="linux",provider="azure"}`
	before := metricstest.Sum(scrape(t, "http://"+addr), "grpc_request_count", `grpc_method="/v1alpha1.CSIDriverProvider/Version"`, `grpc_code="OK"`)
	if _, err := v1alpha1.NewCSIDriverProviderClient(conn).Version(t.Context(), &v1alpha1.VersionRequest{Version: "v1alpha1"}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, "http://"+addr)
	if got := metricstest.Sum(body, "grpc_request_count", `grpc_method="/v1alpha1.CSIDriverProvider/Version"`, `grpc_code="OK"`) - before; got != 1 || !strings.Contains(body, version) {
		t.Errorf("Version calls grew by %v, want 1 as %s:\n%s", got, version, body)
	}
}

// With the cache on, a second mount of an object within the TTL is a hit and fetches nothing.
func TestMetricsCacheHitsAndMisses(t *testing.T) {
	e := newEnv(t, time.Minute)
	id := e.identity(t, "cached")
	e.federate(t, "cached", "default", "cached")
	e.assign(t, e.vaultID, roleSecretsUser, *id.Properties.PrincipalID)
	e.setSecret(t, "cached-secret", "c4ched-value")
	srv := httptest.NewServer(csiprovider.MetricsHandler())
	t.Cleanup(srv.Close)
	counts := func() (hits, misses, gets float64) {
		b := scrape(t, srv.URL)
		return metricstest.Sum(b, "keyvault_cache_lookups_total", `result="hit"`, `provider="azure"`),
			metricstest.Sum(b, "keyvault_cache_lookups_total", `result="miss"`, `provider="azure"`),
			metricstest.Sum(b, "keyvault_request_count", `object_name="cached-secret"`)
	}
	h0, m0, g0 := counts()
	for i := range 2 {
		req := e.request(t, map[string]string{"clientID": *id.Properties.ClientID,
			csiprovider.AttrSATokens: e.saTokens(t, "default", "cached"), "objects": objects("objectName: cached-secret")}, "cached-"+strconv.Itoa(i), nil)
		if _, err := e.mount(t, req); err != nil {
			t.Fatalf("mount %d: %v", i, err)
		}
	}
	h, m, g := counts()
	if h-h0 != 1 || m-m0 != 1 || g-g0 != 1 {
		t.Errorf("two mounts of one object: %v hits, %v misses, %v Key Vault GETs; want 1, 1, 1", h-h0, m-m0, g-g0)
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	body, err := metricstest.Scrape(base)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
