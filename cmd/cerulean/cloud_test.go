package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// buildCerulean builds this command into a temporary directory, so the test does not depend on
// the Makefile or on bin/ being current.
func buildCerulean(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cerulean")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// cloudProcess is a running `cerulean cloud`.
type cloudProcess struct {
	cmd    *exec.Cmd
	env    map[string]string // what `cerulean cloud env` printed while it ran
	stderr *bytes.Buffer     // its log (every request: -v); read only after exited
	exited chan error
}

// startCloudProcess starts `cerulean cloud -v` on a free port and waits for its env file, the
// readiness signal.
func startCloudProcess(t *testing.T, bin, dir string) *cloudProcess {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, "env"))
	stderr := &bytes.Buffer{}
	cmd := exec.Command(bin, "cloud", "-v", "--addr", "127.0.0.1:0", "--data-dir", dir)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &cloudProcess{cmd: cmd, stderr: stderr, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { p.kill(t) })
	// A generous bound, not a timing assertion: it only stops a hung test.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "env")); err == nil {
			break
		}
		select {
		case err := <-p.exited:
			p.exited <- err // for the cleanup's kill
			t.Fatalf("cerulean cloud exited: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill(t) // the log is complete, and no longer written, once the process is gone
			t.Fatalf("cerulean cloud did not become ready\n%s", stderr.String())
		}
	}
	out, err := exec.Command(bin, "cloud", "env", "--data-dir", dir).Output()
	if err != nil {
		t.Fatalf("cerulean cloud env while the cloud runs: %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		k, v, ok2 := strings.Cut(line, "=")
		if !ok || !ok2 {
			t.Fatalf("cloud env printed %q", sc.Text())
		}
		env[k] = v
	}
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
		"AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_AUTHORITY_HOST", "AZURE_RESOURCE_MANAGER_ENDPOINT",
		"AZURE_RESOURCE_MANAGER_AUDIENCE", "SSL_CERT_FILE", "CERULEAN_CLOUD_DATA_DIR"} {
		if env[k] == "" {
			t.Errorf("cloud env lacks %s:\n%s", k, out)
		}
	}
	p.env = env
	return p
}

// kill sends SIGKILL (no shutdown path runs) and waits for the exit; later calls do nothing.
func (p *cloudProcess) kill(t *testing.T) {
	t.Helper()
	if p.exited == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	if err := <-p.exited; err != nil {
		t.Logf("cerulean cloud stopped: %v", err) // killed on purpose
	}
	p.exited = nil
}

// client is an HTTP client trusting the cloud's CA file, and an ARM token of the bootstrap principal.
func client(t *testing.T, env map[string]string) (*http.Client, string) {
	t.Helper()
	caPEM, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA in SSL_CERT_FILE")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	cred, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{DisableInstanceDiscovery: true, ClientOptions: azcore.ClientOptions{
			Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: env["AZURE_AUTHORITY_HOST"]}, Transport: hc,
		}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{env["AZURE_RESOURCE_MANAGER_AUDIENCE"] + "/.default"}})
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	return hc, tok.Token
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

// TestCloudSurvivesKill9 kills `cerulean cloud` with SIGKILL during concurrent writes and checks
// that every write it acknowledged with a 2xx reads back after a restart.
func TestCloudSurvivesKill9(t *testing.T) {
	bin := buildCerulean(t)
	dir := filepath.Join(t.TempDir(), "cloud")
	first := startCloudProcess(t, bin, dir)
	env := first.env
	hc, token := client(t, env)
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
	first.kill(t)
	wg.Wait()
	if badResp != nil {
		t.Fatal(badResp)
	}

	// The log of every request the killed cloud served holds neither the secret nor the token.
	if log := first.stderr.String(); !strings.Contains(log, "Served request") ||
		strings.Contains(log, env["AZURE_CLIENT_SECRET"]) || strings.Contains(log, token) {
		t.Error("the cloud's log lacks request lines, or holds the client secret or an access token")
	}

	env2 := startCloudProcess(t, bin, dir).env
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"} {
		if env2[k] != env[k] {
			t.Errorf("%s changed across the restart", k)
		}
	}
	hc2, token2 := client(t, env2)
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
	err := runCloudEnv(&out, t.TempDir())
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "cerulean cloud --data-dir") {
		t.Fatalf("got %v", err)
	}
}
