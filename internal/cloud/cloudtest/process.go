package cloudtest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Process is a running `cerulean-local cloud` child process, for tests that kill it with SIGKILL.
type Process struct {
	Env    map[string]string // what `cerulean-local cloud env` printed while it ran, unquoted
	cmd    *exec.Cmd
	stderr *SyncBuffer
	exited chan error
}

// StartProcess starts `bin cloud ARGS --addr 127.0.0.1:0 --data-dir dir` (bin from
// BuildCeruleanLocal), waits for its env file (the readiness signal) and reads `cerulean-local
// cloud env`. The process is killed when the test ends.
func StartProcess(t testing.TB, bin, dir string, args ...string) *Process {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, "env"))
	stderr := &SyncBuffer{}
	args = append(append([]string{"cloud"}, args...), "--addr", "127.0.0.1:0", "--proxy-addr", "0", "--data-dir", dir)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, stderr: stderr, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { p.Kill(t) })
	// A generous bound, not a timing assertion: it only stops a hung test.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(dir, "env")); err == nil {
			break
		}
		select {
		case err := <-p.exited:
			p.exited <- err // for the cleanup's Kill
			t.Fatalf("cerulean-local cloud exited: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill(t) // the log is complete, and no longer written, once the process is gone
			t.Fatalf("cerulean-local cloud did not become ready\n%s", stderr.String())
		}
	}
	out, err := exec.Command(bin, "cloud", "env", "--data-dir", dir).Output()
	if err != nil {
		t.Fatalf("cerulean-local cloud env while the cloud runs: %v", err)
	}
	p.Env = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		k, v, ok2 := strings.Cut(line, "=")
		if !ok || !ok2 {
			t.Fatalf("cloud env printed %q", sc.Text())
		}
		p.Env[k] = strings.Trim(v, "'")
	}
	return p
}

// Kill sends SIGKILL (no shutdown path runs) and waits for the exit; later calls do nothing.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if p.exited == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	if err := <-p.exited; err != nil {
		t.Logf("cerulean-local cloud stopped: %v", err) // killed on purpose
	}
	p.exited = nil
}

// Log is what the process wrote to stderr; complete once it has been killed.
func (p *Process) Log() string { return p.stderr.String() }

// HTTPClient is an HTTP client that trusts the process's CA (SSL_CERT_FILE).
func (p *Process) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(p.Env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA in SSL_CERT_FILE")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}
}

// ClientOptions are SDK client options for the process: its authority host and Resource
// Manager, its CA trusted, and no retries, so that a test sees every status.
func (p *Process) ClientOptions(t testing.TB) azcore.ClientOptions {
	t.Helper()
	return azcore.ClientOptions{
		Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: p.Env["AZURE_AUTHORITY_HOST"], Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Audience: p.Env["AZURE_RESOURCE_MANAGER_AUDIENCE"], Endpoint: p.Env["AZURE_RESOURCE_MANAGER_ENDPOINT"]},
		}},
		Transport: p.HTTPClient(t),
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}
}

// OwnerCred is the credential of the process's bootstrap principal with these client options.
func (p *Process) OwnerCred(t testing.TB, opts azcore.ClientOptions) azcore.TokenCredential {
	t.Helper()
	cred, err := azidentity.NewClientSecretCredential(p.Env["AZURE_TENANT_ID"], p.Env["AZURE_CLIENT_ID"], p.Env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{DisableInstanceDiscovery: true, ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	return cred
}
