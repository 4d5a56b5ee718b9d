package manager_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/metricstest"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// `cerulean manager` runs as a process against a kubeconfig and the local cloud's environment:
// it serves its probes, reconciles, and stops cleanly on SIGTERM.
func TestManagerProcess(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	bin := cloudtest.BuildCerulean(t)
	s := az.Settings()
	health, metrics := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "manager", "--kubeconfig", devenvtest.ControlPlane(t).Kubeconfig,
		"--health-addr", health, "--metrics-addr", metrics, "--poll-interval", "200ms")
	cmd.Env = append(os.Environ(),
		"AZURE_TENANT_ID="+s.TenantID, "AZURE_SUBSCRIPTION_ID="+s.SubscriptionID, "AZURE_CLIENT_ID="+s.ClientID,
		"AZURE_CLIENT_SECRET="+s.ClientSecret, "AZURE_AUTHORITY_HOST="+s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT="+s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE="+s.ResourceManagerAudience,
		"SSL_CERT_FILE="+s.CAFile, "AZURE_SYNC_PERIOD=1m", "AZURE_TARGET_NAMESPACES="+ns)
	logs := &cloudtest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("manager exited with %v\n%s", err, tail(logs.String(), 30))
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("manager did not stop on SIGTERM")
		}
	})
	eventually(t, time.Minute, "readyz", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s/readyz", health))
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	other := namespace(t, c) // outside AZURE_TARGET_NAMESPACES
	ignored := resourceGroup("ignored-rg", nil)
	create(t, c, other, ignored)
	rg := resourceGroup("process-rg", nil)
	create(t, c, ns, rg)
	waitReady(t, c, rg, time.Minute)
	if u := get(t, c, other, "ignored-rg", ignored); len(u.GetFinalizers()) != 0 || u.Object["status"] != nil {
		t.Errorf("an object outside AZURE_TARGET_NAMESPACES was reconciled: finalizers %v, status %v", u.GetFinalizers(), u.Object["status"])
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", metrics))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `controller_runtime_reconcile_total{controller="resourcegroup"`) {
		t.Errorf("metrics lack the reconcile counters:\n%.2000s", body)
	}
	if n := metricstest.Sum(string(body), "azure_successful_requests_total", `resource="Microsoft.Resources/resourceGroups"`, `requestType="PUT"`); n < 1 {
		t.Errorf("the process's metrics count %v answered PUTs of groups, want at least 1", n)
	}
	if !groupExists(t, az, "process-rg") {
		t.Error("the group is not in the cloud")
	}
	if err := c.Delete(t.Context(), rg); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rg, time.Minute)
}

// A manager whose configuration sets no limit talks to kube-apiserver at DefaultKubeQPS (100
// requests a second, bursts of 200), not client-go's bare default of 5, which made every
// reconcile wait for its turn (601 objects took 7 minutes to be Ready; 100 pairs: 2m20s → 36s;
// `up` installed its CRDs at that pace), nor controller-runtime's 20, which paced 10,000.
func TestRESTConfigWithoutLimitsGetsTheManagersDefaults(t *testing.T) {
	c, err := manager.RESTConfig(devenvtest.ControlPlane(t).Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	got := manager.WithDefaultLimits(c)
	if got.QPS != manager.DefaultKubeQPS || got.Burst != manager.DefaultKubeBurst || manager.DefaultKubeQPS < 100 {
		t.Errorf("QPS %v, burst %d; want %d and %d", got.QPS, got.Burst, manager.DefaultKubeQPS, manager.DefaultKubeBurst)
	}
	c.QPS, c.Burst = 7, 9
	if got := manager.WithDefaultLimits(c); got.QPS != 7 || got.Burst != 9 {
		t.Errorf("limits the configuration sets were replaced: QPS %v, burst %d", got.QPS, got.Burst)
	}
}
