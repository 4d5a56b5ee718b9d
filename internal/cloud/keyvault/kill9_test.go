package keyvault_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
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
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
)

// childCloud is a `cerulean cloud` process and the exports `cerulean cloud env` printed for it.
type childCloud struct {
	cmd  *exec.Cmd
	env  map[string]string
	opts azcore.ClientOptions
	cred azcore.TokenCredential
}

func buildCerulean(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cerulean")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/cerulean/cerulean/cmd/cerulean").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startChild starts `cerulean cloud` on a free port and waits for its env file.
func startChild(t *testing.T, bin, dir string) *childCloud {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, "env"))
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "cloud", "--addr", "127.0.0.1:0", "--data-dir", dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(2 * time.Minute) // only stops a hung test
	for {
		if _, err := os.Stat(filepath.Join(dir, "env")); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("cerulean cloud exited: %v\n%s", waitErr, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("cerulean cloud did not become ready\n%s", stderr.String())
		}
	}
	out, err := exec.Command(bin, "cloud", "env", "--data-dir", dir).Output()
	if err != nil {
		t.Fatalf("cerulean cloud env: %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		env[k] = strings.Trim(v, "'")
	}
	caPEM, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16}}
	c := &childCloud{cmd: cmd, env: env, opts: azcore.ClientOptions{
		Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: env["AZURE_AUTHORITY_HOST"], Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Audience: env["AZURE_RESOURCE_MANAGER_AUDIENCE"], Endpoint: env["AZURE_RESOURCE_MANAGER_ENDPOINT"]},
		}},
		Transport: hc,
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}
	c.cred, err = azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{DisableInstanceDiscovery: true, ClientOptions: c.opts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *childCloud) secrets(t *testing.T, uri string) *azsecrets.Client {
	t.Helper()
	sc, err := azsecrets.NewClient(uri, c.cred, &azsecrets.ClientOptions{ClientOptions: c.opts, DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestSecretsSurviveKill9 kills a child `cerulean cloud` with SIGKILL under concurrent secret
// writes, restarts it on the same data directory, and reads back every version it acknowledged,
// at the same vaultUri.
func TestSecretsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildCerulean(t)
	dir := filepath.Join(t.TempDir(), "cloud")
	c := startChild(t, bin, dir)
	ctx := t.Context()
	sub := c.env["AZURE_SUBSCRIPTION_ID"]
	armOpts := &arm.ClientOptions{ClientOptions: c.opts}
	groups, err := armresources.NewResourceGroupsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: to.Ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}
	vaults, err := armkeyvault.NewVaultsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, "rg", "kv-durable", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(c.env["AZURE_TENANT_ID"]), EnableRbacAuthorization: to.Ptr(true),
			SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ras, err := armauthorization.NewRoleAssignmentsClient(sub, c.cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	objectID := ""
	if p, err := c.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{vaultScope}}); err == nil {
		objectID = claim(t, p.Token, "oid")
	}
	_, err = ras.Create(ctx, *v.ID, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + roleSecretsOfficer),
		PrincipalID:      to.Ptr(objectID),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri := *v.Properties.VaultURI
	sc := c.secrets(t, uri)

	type ack struct{ name, version, value string }
	var (
		mu      sync.Mutex
		acked   []ack
		enough  = make(chan struct{})
		once    sync.Once
		wg      sync.WaitGroup
		failure error
	)
	const writers, killAfter = 8, 80
	for g := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				name, value := fmt.Sprintf("w%d", g), fmt.Sprintf("value-%d-%d", g, i)
				res, err := sc.SetSecret(ctx, name, azsecrets.SetSecretParameters{Value: to.Ptr(value)}, nil)
				if err != nil {
					var re *azcore.ResponseError
					if errors.As(err, &re) {
						mu.Lock()
						failure = err
						mu.Unlock()
					}
					return // the cloud is gone
				}
				mu.Lock()
				acked = append(acked, ack{name, res.ID.Version(), value})
				if len(acked) >= killAfter {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Fatalf("writers stalled (%v)", failure)
	}
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown path runs
		t.Fatal(err)
	}
	wg.Wait()
	if failure != nil {
		t.Fatalf("a write failed before the kill: %v", failure)
	}

	c2 := startChild(t, bin, dir)
	got, err := armkeyvault.NewVaultsClient(sub, c2.cred, &arm.ClientOptions{ClientOptions: c2.opts})
	if err != nil {
		t.Fatal(err)
	}
	v2, err := got.Get(ctx, "rg", "kv-durable", nil)
	if err != nil || *v2.Properties.VaultURI != uri {
		t.Fatalf("vaultUri after restart = %v (%v), want %s", v2.Properties, err, uri)
	}
	sc2 := c2.secrets(t, uri)
	for _, a := range acked {
		s, err := sc2.GetSecret(ctx, a.name, a.version, nil)
		if err != nil || *s.Value != a.value {
			t.Errorf("acknowledged %s/%s lost after kill -9: %v", a.name, a.version, err)
		}
	}
	t.Logf("%d acknowledged secret versions survived kill -9", len(acked))
}

// claim reads one string claim of a JWT (the test's own token; no verification needed).
func claim(t *testing.T, token, name string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatal("token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	v, _ := claims[name].(string)
	return v
}
