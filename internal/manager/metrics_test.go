package manager_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/metricstest"
)

// The manager's metrics endpoint serves ASO's ARM request series and the Ready gauge after real
// traffic: a group ARM creates counts its PUT's 2xx, one ARM refuses counts the refusal's 409
// (ASO counts a response of any status as "successful"), and the ResourceGroup kind reports
// one Ready object. Nothing in the series names a subscription, a group or a secret.
func TestManagerMetrics(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	addr := freeAddr(t)
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: time.Hour, PollInterval: 100 * time.Millisecond,
		TargetNamespaces: []string{ns}, MetricsAddr: addr})

	good := resourceGroup("metrics-rg", nil)
	create(t, c, ns, good)
	waitReady(t, c, good, time.Minute)
	// The same Azure name in another location: ARM answers 409 InvalidResourceGroupLocation.
	bad := obj(rgAPI, "ResourceGroup", "metrics-rg-elsewhere", map[string]any{"location": "eastus", "azureName": "metrics-rg"})
	create(t, c, ns, bad)
	eventually(t, time.Minute, "the conflicting group fails", func() (bool, string) {
		st, _, reason, msg := ready(get(t, c, ns, bad.GetName(), bad))
		return st == "False" && strings.Contains(msg, "InvalidResourceGroupLocation"), st + " " + reason + ": " + msg
	})

	const rgType = `resource="Microsoft.Resources/resourceGroups"`
	var body string
	eventually(t, time.Minute, "the series after the traffic", func() (bool, string) {
		body, _ = metricstest.Scrape("http://" + addr) // retried until the series are there
		created := metricstest.Sum(body, "azure_successful_requests_total", rgType, `requestType="PUT"`, `responseCode="201"`) +
			metricstest.Sum(body, "azure_successful_requests_total", rgType, `requestType="PUT"`, `responseCode="200"`)
		refused := metricstest.Sum(body, "azure_successful_requests_total", rgType, `requestType="PUT"`, `responseCode="409"`)
		timed := metricstest.Sum(body, "azure_requests_time_seconds_count", rgType, `requestType="PUT"`)
		readyRGs := metricstest.Sum(body, "azure_resources_ready", `group="resources.azure.com"`, `kind="ResourceGroup"`)
		return created >= 1 && refused >= 1 && timed >= created+refused && readyRGs == 1,
			fmt.Sprintf("PUT 2xx %v, PUT 409 %v, timed PUTs %v, Ready ResourceGroups %v", created, refused, timed, readyRGs)
	})
	if n := metricstest.Sum(body, "azure_failed_requests_total", rgType, `requestType="PUT"`); n != 0 {
		t.Errorf("%v PUTs counted as unanswered; ARM answered each", n)
	}
	if !strings.Contains(body, "# TYPE azure_requests_time_seconds histogram") {
		t.Error("azure_requests_time_seconds is not a histogram")
	}
	s := az.Settings()
	for what, secret := range map[string]string{"client secret": s.ClientSecret, "subscription id": s.SubscriptionID, "group name": "metrics-rg"} {
		if strings.Contains(body, secret) {
			t.Errorf("the metrics name the %s", what)
		}
	}
	if code, _ := httpGet(t, "http://"+addr+"/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("without --profiling the metrics endpoint answers /debug/pprof/heap with %d, want 404", code)
	}
}

// With Profiling on, the metrics endpoint serves Go's heap profile too.
func TestManagerProfiling(t *testing.T) {
	c := kube(t)
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	ns := namespace(t, c)
	addr := freeAddr(t)
	startManagerOpts(t, manager.Options{Azure: azureConfig(az), SyncPeriod: time.Hour, TargetNamespaces: []string{ns}, MetricsAddr: addr, Profiling: true})
	eventually(t, time.Minute, "the heap profile", func() (bool, string) {
		code, body := httpGet(t, "http://"+addr+"/debug/pprof/heap?debug=1")
		return code == http.StatusOK && strings.Contains(body, "heap profile"), fmt.Sprintf("%d %.100s", code, body)
	})
}

// httpGet is a GET's status and body; a failed connection is status 0.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // the test's own loopback endpoint
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
