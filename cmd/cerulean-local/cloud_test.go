package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// startCloudProcess starts `cerulean-local cloud -v` (every request logged) on a free port, waits for
// its env file, the readiness signal, and checks that `cerulean-local cloud env` printed every export.
func startCloudProcess(t *testing.T, bin, dir string) *cloudtest.Process {
	t.Helper()
	p := cloudtest.StartProcess(t, bin, dir, "-v")
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
		"AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_AUTHORITY_HOST", "AZURE_RESOURCE_MANAGER_ENDPOINT",
		"AZURE_RESOURCE_MANAGER_AUDIENCE", "SSL_CERT_FILE", "CERULEAN_CLOUD_DATA_DIR"} {
		if p.Env[k] == "" {
			t.Errorf("cloud env lacks %s:\n%v", k, p.Env)
		}
	}
	return p
}

// client is an HTTP client trusting the cloud's CA file, and an ARM token of the bootstrap principal.
func client(t *testing.T, p *cloudtest.Process) (*http.Client, string) {
	t.Helper()
	return p.HTTPClient(t), cloudtest.Token(t, p.OwnerCred(t, p.ClientOptions(t)), p.Env["AZURE_RESOURCE_MANAGER_AUDIENCE"]+"/.default")
}

func call(ctx context.Context, hc *http.Client, token, method, url string, body any) (int, map[string]any, error) {
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil && resp.StatusCode != http.StatusNoContent {
		return resp.StatusCode, nil, fmt.Errorf("decode: %w", err)
	}
	return resp.StatusCode, out, nil
}

// TestCloudSurvivesKill9 kills `cerulean-local cloud` with SIGKILL during concurrent writes and checks
// that every write it acknowledged with a 2xx reads back after a restart.
func TestCloudSurvivesKill9(t *testing.T) {
	bin := cloudtest.BuildCeruleanLocal(t)
	dir := filepath.Join(t.TempDir(), "cloud")
	first := startCloudProcess(t, bin, dir)
	env := first.Env
	hc, token := client(t, first)
	base := strings.TrimSuffix(env["AZURE_AUTHORITY_HOST"], "/") + "/_cerulean/admin/principals"

	type acked struct {
		clientID string
		fic      bool
	}
	var (
		mu      sync.Mutex
		writes  = map[string]*acked{}
		enough  = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
		badResp error
	)
	const writers, killAfter = 8, 60
	for g := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				status, out, err := call(t.Context(), hc, token, "POST", base, map[string]any{"displayName": fmt.Sprintf("w%d-%d", g, i)})
				if err != nil {
					return // the cloud is gone
				}
				if status != http.StatusCreated {
					mu.Lock()
					badResp = fmt.Errorf("create principal: %d %v", status, out)
					mu.Unlock()
					return
				}
				a := &acked{clientID: out["clientId"].(string)}
				mu.Lock()
				writes[a.clientID] = a
				if len(writes) >= killAfter {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
				status, _, err = call(t.Context(), hc, token, "PUT", base+"/"+a.clientID+"/federatedIdentityCredentials/k8s",
					map[string]any{"issuer": "https://issuer.example", "subject": "system:serviceaccount:ns:" + a.clientID, "audiences": []string{"api://AzureADTokenExchange"}})
				if err != nil {
					return
				}
				if status == http.StatusCreated {
					mu.Lock()
					a.fic = true
					mu.Unlock()
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		mu.Lock()
		t.Fatalf("writers stalled after %d writes (%v)", len(writes), badResp)
	}
	first.Kill(t)
	wg.Wait()
	if badResp != nil {
		t.Fatal(badResp)
	}

	// The log of every request the killed cloud served holds neither the secret nor the token.
	if log := first.Log(); !strings.Contains(log, "Served request") ||
		strings.Contains(log, env["AZURE_CLIENT_SECRET"]) || strings.Contains(log, token) {
		t.Error("the cloud's log lacks request lines, or holds the client secret or an access token")
	}

	second := startCloudProcess(t, bin, dir)
	env2 := second.Env
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"} {
		if env2[k] != env[k] {
			t.Errorf("%s changed across the restart", k)
		}
	}
	hc2, token2 := client(t, second)
	base2 := strings.TrimSuffix(env2["AZURE_AUTHORITY_HOST"], "/") + "/_cerulean/admin/principals"
	fics := 0
	for id, a := range writes {
		status, out, err := call(t.Context(), hc2, token2, "GET", base2+"/"+id, nil)
		if err != nil || status != http.StatusOK {
			t.Errorf("acknowledged principal %s after restart: %d %v %v", id, status, out, err)
			continue
		}
		if a.fic {
			fics++
			list, _ := out["federatedIdentityCredentials"].([]any)
			if len(list) != 1 {
				t.Errorf("acknowledged federated credential of %s lost: %v", id, out)
			}
		}
	}
	t.Logf("%d acknowledged principals and %d federated credentials survived kill -9", len(writes), fics)
}

// TestCloudEnvWithoutCloud: `cloud env` on a directory no cloud used fails with a hint.
func TestCloudEnvWithoutCloud(t *testing.T) {
	var out bytes.Buffer
	err := cloud.PrintEnv(&out, t.TempDir())
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "cerulean-local cloud --data-dir") {
		t.Fatalf("got %v", err)
	}
}
