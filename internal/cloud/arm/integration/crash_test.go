package integration_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
)

// child is a `cerulean cloud` process.
type child struct {
	cmd  *exec.Cmd
	env  map[string]string
	opts *arm.ClientOptions
	cred azcore.TokenCredential
}

func buildCerulean(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cerulean")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/cerulean/cerulean/cmd/cerulean").CombinedOutput()
	if err != nil {
		t.Fatalf("build cerulean: %v\n%s", err, out)
	}
	return bin
}

// startChild runs the cloud on dataDir and waits for its env file, the readiness signal.
func startChild(t *testing.T, bin, dataDir string) *child {
	t.Helper()
	envFile := filepath.Join(dataDir, "env")
	_ = os.Remove(envFile)
	cmd := exec.Command(bin, "cloud", "--addr", "127.0.0.1:0", "--data-dir", dataDir)
	logf, err := os.Create(filepath.Join(t.TempDir(), "cloud.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(envFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("cloud did not become ready:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := &child{cmd: cmd, env: readEnv(t, envFile)}
	caPEM, err := os.ReadFile(c.env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	co := azcore.ClientOptions{
		Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: c.env["AZURE_AUTHORITY_HOST"], Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Audience: c.env["AZURE_RESOURCE_MANAGER_AUDIENCE"], Endpoint: c.env["AZURE_RESOURCE_MANAGER_ENDPOINT"]},
		}},
		Transport: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}
	c.opts = &arm.ClientOptions{ClientOptions: co}
	c.cred, err = azidentity.NewClientSecretCredential(c.env["AZURE_TENANT_ID"], c.env["AZURE_CLIENT_ID"], c.env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: co, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok {
			out[k] = strings.Trim(v, "'")
		}
	}
	return out
}

// TestKill9UnderConcurrentPUTs: every PUT answered 2xx before a kill -9 is there after restart,
// with the same service-made ids.
func TestKill9UnderConcurrentPUTs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the cerulean binary")
	}
	bin := buildCerulean(t)
	dataDir := t.TempDir()
	c := startChild(t, bin, dataDir)
	sub := c.env["AZURE_SUBSCRIPTION_ID"]
	groups, err := armresources.NewResourceGroupsClient(sub, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := armmsi.NewUserAssignedIdentitiesClient(sub, c.cred, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := groups.CreateOrUpdate(ctx, "rg", armresources.ResourceGroup{Location: ptr("eastus")}, nil); err != nil {
		t.Fatal(err)
	}

	var (
		mu    sync.Mutex
		acked = map[string]string{} // name -> clientId
		wg    sync.WaitGroup
	)
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	for w := range 8 {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil; i++ {
				name := fmt.Sprintf("id-%d-%d", w, i)
				res, err := ids.CreateOrUpdate(loadCtx, "rg", name, armmsi.Identity{Location: ptr("eastus")}, nil)
				if err != nil {
					var re *azcore.ResponseError
					if errors.As(err, &re) {
						t.Errorf("PUT %s: %v", name, err) // the server answered, but not 2xx
					}
					return // connection lost: the process is gone
				}
				mu.Lock()
				acked[name] = *res.Properties.ClientID
				mu.Unlock()
			}
		})
	}
	// Kill once a good number of writes have been acknowledged, mid-stream.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 40 || time.Now().After(deadline) {
			break
		}
	}
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	wg.Wait()
	stop()
	if len(acked) == 0 {
		t.Fatal("no PUT succeeded before the kill")
	}

	c2 := startChild(t, bin, dataDir)
	ids2, err := armmsi.NewUserAssignedIdentitiesClient(sub, c2.cred, c2.opts)
	if err != nil {
		t.Fatal(err)
	}
	for name, clientID := range acked {
		got, err := ids2.Get(ctx, "rg", name, nil)
		if err != nil {
			t.Errorf("acknowledged %s is gone after kill -9: %v", name, err)
			continue
		}
		if *got.Properties.ClientID != clientID {
			t.Errorf("%s: client id %s, acknowledged %s", name, *got.Properties.ClientID, clientID)
		}
	}
	t.Logf("%d acknowledged PUTs all present after kill -9 and restart", len(acked))
}
