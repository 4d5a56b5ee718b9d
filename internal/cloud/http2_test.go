package cloud_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"

	"github.com/cerulean/cerulean/internal/cloud/admin"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/testenv"
)

// curlTries is how often each request is sent. Before the fix, 7 of 30 tries of one route lost
// their answer under load; 8 tries of each of the ~90 requests below make a miss unlikely.
const curlTries = 8

// TestHTTP2AnswersArriveWhole reproduces the lost HTTP/2 answers the way users met them: Debian's
// curl (HTTP/2 over TLS) sends a small body to a route whose handler answers without reading it
// (a refused token, an action that ignores its body), and the server resets the stream while the
// client still owes it the body; under load curl 7.88 then reports "(92) Stream error in the
// HTTP/2 framing layer" and drops the answer it had already been sent. Every route that takes a
// body is tried, authenticated and not, many times, with the CPU kept busy by the test itself:
// every answer must arrive whole (curl succeeds, the body has its content-length, and error
// answers have a body in their service's shape).
func TestHTTP2AnswersArriveWhole(t *testing.T) {
	curl := needCurl(t)
	e := start(t, "")
	s := e.c.Settings()
	owner := cloudtest.OwnerCred(t, e.c)
	armToken := cloudtest.Token(t, owner, "https://management.core.windows.net//.default")
	vaultURI := curlVault(t, e, "kv-h2")
	vaultToken := cloudtest.Token(t, owner, "https://vault.azure.net/.default")
	p, _ := cloudtest.NewPrincipal(t, e.c, "h2-target")

	dir := t.TempDir()
	headers := func(name string, lines ...string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Tokens go in header files, not on command lines.
	armAuth := headers("arm", "Authorization: Bearer "+armToken, "Content-Type: application/json")
	kvAuth := headers("kv", "Authorization: Bearer "+vaultToken, "Content-Type: application/json")
	noAuth := headers("none", "Content-Type: application/json")
	form := headers("form", "Content-Type: application/x-www-form-urlencoded")
	badAuth := headers("bad", "Authorization: Bearer not-a-token", "Content-Type: application/json")

	armBody := `{"location":"eastus","properties":{},"tags":{"a":"b"}}`
	var reqs []curlReq
	add := func(name, method, url, hdr, body string) {
		reqs = append(reqs, curlReq{name: name, method: method, url: url, headers: hdr, body: body})
	}
	// ARM: every route of its table that takes a body, as the Owner and without a token.
	armRoutes := 0
	for _, rt := range e.c.ARM().Routes() {
		if rt.Method != http.MethodPut && rt.Method != http.MethodPatch && rt.Method != http.MethodPost {
			continue
		}
		armRoutes++
		u := s.URL + strings.ReplaceAll(rt.Example, "{subscriptionId}", s.SubscriptionID) + "?api-version=" + e.c.ARM().APIVersions(rt.Type)[0]
		add("ARM "+rt.Method+" "+rt.Type, rt.Method, u, armAuth, armBody)
		add("ARM "+rt.Method+" "+rt.Type+" (no token)", rt.Method, u, noAuth, armBody)
	}
	if armRoutes < 10 {
		t.Fatalf("only %d ARM routes take a body: the route table was not walked", armRoutes)
	}
	// The admin API.
	adm := s.URL + admin.Prefix
	for _, hdr := range []struct{ name, file string }{{"", armAuth}, {" (no token)", noAuth}, {" (bad token)", badAuth}} {
		add("admin POST principals"+hdr.name, http.MethodPost, adm+"/principals", hdr.file, `{"displayName":"h2"}`)
		add("admin POST secrets"+hdr.name, http.MethodPost, adm+"/principals/"+p.ClientID+"/secrets", hdr.file, `{}`)
		add("admin PUT federated credential"+hdr.name, http.MethodPut, adm+"/principals/"+p.ClientID+"/federatedIdentityCredentials/h2", hdr.file,
			`{"issuer":"https://issuer.example","subject":"system:serviceaccount:a:b","audiences":["api://AzureADTokenExchange"]}`)
		add("admin PUT faults"+hdr.name, http.MethodPut, adm+"/faults", hdr.file, `{"rules":[]}`)
	}
	// Entra ID: a token granted, a token refused, a body where none is expected.
	tokenURL := s.URL + "/" + s.TenantID + "/oauth2/v2.0/token"
	add("Entra token", http.MethodPost, tokenURL, form, "grant_type=client_credentials&client_id="+s.ClientID+
		"&client_secret="+s.ClientSecret+"&scope=https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default")
	add("Entra token refused", http.MethodPost, tokenURL, form, "grant_type=client_credentials&client_id="+s.ClientID+
		"&client_secret=wrong&scope=https%3A%2F%2Fmanagement.core.windows.net%2F%2F.default")
	add("Entra discovery with a body", http.MethodPost, s.URL+"/"+s.TenantID+"/v2.0/.well-known/openid-configuration", noAuth, armBody)
	add("Entra unknown path", http.MethodPost, s.URL+"/nowhere/at/all", noAuth, armBody)
	// The managed-identity endpoints take no body: a body sent anyway must not cost the answer.
	add("IMDS with a body", http.MethodPost, s.URL+msi.IMDSPath+"?api-version=2018-02-01&resource=https://vault.azure.net", noAuth, armBody)
	add("App Service with a body", http.MethodPost, s.URL+msi.AppServicePath+"?api-version=2019-08-01&resource=https://vault.azure.net", noAuth, armBody)
	// Key Vault's data plane, with its token, without one (the challenge), and with a bad one.
	kv := strings.TrimSuffix(vaultURI, "/")
	for _, hdr := range []struct{ name, file string }{{"", kvAuth}, {" (no token)", noAuth}, {" (bad token)", badAuth}} {
		add("Key Vault set"+hdr.name, http.MethodPut, kv+"/secrets/h2?api-version=7.4", hdr.file, `{"value":"v"}`)
		add("Key Vault update"+hdr.name, http.MethodPatch, kv+"/secrets/h2/0123456789abcdef0123456789abcdef?api-version=7.4", hdr.file, `{"tags":{"a":"b"}}`)
		add("Key Vault backup"+hdr.name, http.MethodPost, kv+"/secrets/h2/backup?api-version=7.4", hdr.file, `{}`)
		add("Key Vault restore"+hdr.name, http.MethodPost, kv+"/secrets/restore?api-version=7.4", hdr.file, `{"value":"bm90LWEtYmFja3Vw"}`)
		add("Key Vault recover"+hdr.name, http.MethodPost, kv+"/deletedsecrets/h2/recover?api-version=7.4", hdr.file, `{}`)
	}

	// Bodies over each service's cap: refused in that service's shape, and the refusal arrives.
	over := func(n int) string { return `{"x":"` + strings.Repeat("a", n) + `"}` }
	tooLarge := func(name, method, url, hdr, body string, status int, code string) {
		reqs = append(reqs, curlReq{name: name, method: method, url: url, headers: hdr, body: body, wantStatus: status, wantCode: code})
	}
	tooLarge("ARM body over 1 MiB", http.MethodPut, s.URL+"/subscriptions/"+s.SubscriptionID+"/resourcegroups/big?api-version=2021-04-01",
		armAuth, over(1<<20), http.StatusBadRequest, "RequestContentTooLarge")
	tooLarge("Entra token body over 64 KiB", http.MethodPost, tokenURL, form, "client_id="+strings.Repeat("a", 64<<10),
		http.StatusRequestEntityTooLarge, "invalid_request")
	tooLarge("admin body over 64 KiB", http.MethodPost, adm+"/principals", armAuth, over(64<<10),
		http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
	tooLarge("Key Vault body over 256 KiB", http.MethodPut, kv+"/secrets/big?api-version=7.4", kvAuth, over(256<<10),
		http.StatusBadRequest, "BadParameter")

	stop := keepCPUBusy(t)
	defer stop()
	type failure struct {
		req curlReq
		msg string
	}
	var (
		mu       sync.Mutex
		failures []failure
		sent     atomic.Int64
		work     = make(chan curlReq)
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for r := range work {
				sent.Add(1)
				if msg := r.run(t, curl, s.CAFile); msg != "" {
					mu.Lock()
					failures = append(failures, failure{r, msg})
					mu.Unlock()
				}
			}
		})
	}
	for range curlTries {
		for _, r := range reqs {
			work <- r
		}
	}
	close(work)
	wg.Wait()
	stop()
	for i, f := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-i)
			break
		}
		t.Errorf("%s %s: %s", f.req.name, f.req.method, f.msg)
	}
	t.Logf("%d requests (%d kinds) sent with curl over HTTP/2, %d answers lost or broken", sent.Load(), len(reqs), len(failures))
}

type curlReq struct {
	name, method, url, headers, body string
	// For a body over a service's cap: the status and error code of that service's refusal.
	wantStatus int
	wantCode   string
}

// run sends the request once and returns what was wrong with the answer ("" if nothing).
func (r curlReq) run(t *testing.T, curl, caFile string) string {
	// A bound against a hung curl, not an assertion about speed.
	cmd := exec.CommandContext(t.Context(), curl, "--http2", "--silent", "--show-error", "--max-time", "60",
		"--cacert", caFile, "--request", r.method, "--header", "@"+r.headers, "--data-binary", "@-",
		"--dump-header", "-", r.url)
	cmd.Stdin = strings.NewReader(r.body)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("curl: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	// Headers, then the body; skip interim (1xx) header blocks.
	head, body, ok := strings.Cut(stdout.String(), "\r\n\r\n")
	for ok && strings.HasPrefix(head, "HTTP/2 1") {
		head, body, ok = strings.Cut(body, "\r\n\r\n")
	}
	lines := strings.Split(head, "\r\n")
	meta := strings.Fields(lines[0])
	if !ok || len(meta) < 2 || meta[0] != "HTTP/2" {
		return fmt.Sprintf("not answered over HTTP/2: %q", lines[0])
	}
	for _, l := range lines[1:] {
		if k, v, _ := strings.Cut(l, ":"); strings.EqualFold(k, "content-length") {
			meta = append(meta, strings.TrimSpace(v))
		}
	}
	status, _ := strconv.Atoi(meta[1])
	if len(meta) == 3 {
		if n, _ := strconv.Atoi(meta[2]); n != len(body) {
			return fmt.Sprintf("status %d: %d bytes of body, content-length %d", status, len(body), n)
		}
	}
	if status != http.StatusNoContent && status != http.StatusAccepted && status != http.StatusOK && body == "" {
		return fmt.Sprintf("status %d with an empty body", status)
	}
	if status >= 400 && (body == "" || !json.Valid([]byte(body))) {
		return fmt.Sprintf("status %d without an error body: %q", status, body)
	}
	if r.wantStatus != 0 && (status != r.wantStatus || !strings.Contains(body, `"`+r.wantCode+`"`)) {
		return fmt.Sprintf("status %d, want %d with code %s: %s", status, r.wantStatus, r.wantCode, body)
	}
	return ""
}

// keepCPUBusy keeps every CPU busy until the returned func is called (idempotent), as other
// processes do on a loaded machine: two goroutines per CPU read /dev/urandom, which burns CPU in
// the kernel. A goroutine in a system call gives its P back to the Go scheduler, so the load
// competes with curl and the server's threads for the CPUs, not with the server's goroutines for
// Go's Ps (spinning in Go would only delay the server's answers, which hides the race).
func keepCPUBusy(t *testing.T) func() {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 2 * runtime.NumCPU() {
		f, err := os.Open("/dev/urandom")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer f.Close()
			buf := make([]byte, 1<<20)
			for !done.Load() {
				if _, err := f.Read(buf); err != nil {
					return
				}
			}
		})
	}
	var once sync.Once
	return func() { once.Do(func() { done.Store(true); wg.Wait() }) }
}

// needCurl finds curl: in CI its absence is a failure (make test-deps installs it), on a
// developer's machine a skip.
func needCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err == nil {
		var out bytes.Buffer
		cmd := exec.CommandContext(t.Context(), p, "--version")
		cmd.Stdout = &out
		if err = cmd.Run(); err == nil && !strings.Contains(out.String(), "HTTP2") {
			err = fmt.Errorf("%s has no HTTP/2 support", p)
		}
	}
	if err != nil {
		testenv.Missing(t, "curl with HTTP/2 is needed; hack/install-test-deps.sh (make test-deps) installs it: %v", err)
	}
	return p
}

// curlVault creates a vault whose access policy gives the bootstrap principal every secret
// permission, and returns its URI.
func curlVault(t *testing.T, e *env, name string) string {
	t.Helper()
	s := e.c.Settings()
	cred := cloudtest.OwnerCred(t, e.c)
	opts := cloudtest.ARMOptions(e.c)
	cloudtest.CreateGroup(t, e.c, cred, opts, "eastus", "rg-h2")
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	all := []*armkeyvault.SecretPermissions{to.Ptr(armkeyvault.SecretPermissionsAll)}
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), "rg-h2", name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"),
		Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(s.TenantID),
			SKU:      &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{{
				TenantID: to.Ptr(s.TenantID), ObjectID: to.Ptr(s.ObjectID),
				Permissions: &armkeyvault.Permissions{Secrets: all},
			}},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create vault: %v", err)
	}
	v, err := poller.PollUntilDone(t.Context(), &azruntime.PollUntilDoneOptions{Frequency: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("create vault: poll: %v", err)
	}
	return *v.Properties.VaultURI
}
