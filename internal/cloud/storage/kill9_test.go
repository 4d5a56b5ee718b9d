package storage_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// azuritePID is the Azurite a cloud of dir started, 0 when none runs.
func azuritePID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "azurite", "azurite.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && alive(pid) {
		return pid
	}
	return 0
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// waitGone waits for pid to exit; the bound only stops a hung test.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proxiedOptions reach a cloud process's public names through its proxy, trusting its CA.
func proxiedOptions(t *testing.T, dir string, p *cloudtest.Process) azcore.ClientOptions {
	t.Helper()
	env, err := cloud.ReadProxyEnv(dir)
	if err != nil {
		t.Fatal(err)
	}
	var proxy string
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(l, "export HTTPS_PROXY="); ok {
			proxy = strings.Trim(v, "'")
		}
	}
	pu, err := url.Parse(proxy)
	if err != nil || proxy == "" {
		t.Fatalf("proxy URL %q: %v", proxy, err)
	}
	ca, err := os.ReadFile(p.Env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(pu)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return azcore.ClientOptions{Transport: &http.Client{Transport: tr}}
}

// TestStorageKill9: blobs acknowledged before a SIGKILL of `cerulean cloud` are all there after
// it starts again on the same data directory; the killed cloud's Azurite exits (it is sent
// SIGTERM by the kernel and saves first), and the stopped cloud leaves no Azurite behind.
func TestStorageKill9(t *testing.T) {
	azuriteDir(t)
	bin := cloudtest.BuildCeruleanLocal(t)
	dir := t.TempDir()
	p := cloudtest.StartProcess(t, bin, dir)
	opts := p.ClientOptions(t)
	cred := p.OwnerCred(t, opts)
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	sub := p.Env["AZURE_SUBSCRIPTION_ID"]
	groups, err := armresources.NewResourceGroupsClient(sub, cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := groups.CreateOrUpdate(t.Context(), "rg", armresources.ResourceGroup{Location: to.Ptr("westeurope")}, nil); err != nil {
		t.Fatal(err)
	}
	accounts, err := armstorage.NewAccountsClient(sub, cred, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := accounts.BeginCreate(t.Context(), "rg", "stkill9", armstorage.AccountCreateParameters{
		Location: to.Ptr("westeurope"), SKU: &armstorage.SKU{Name: to.Ptr(armstorage.SKUNameStandardLRS)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	keys, err := accounts.ListKeys(t.Context(), "rg", "stkill9", nil)
	if err != nil {
		t.Fatal(err)
	}
	blobClient := func() *azblob.Client {
		sk, err := azblob.NewSharedKeyCredential("stkill9", *keys.Keys[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		c, err := azblob.NewClientWithSharedKeyCredential("https://stkill9.blob.core.windows.net/", sk, &azblob.ClientOptions{ClientOptions: proxiedOptions(t, dir, p)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	blob := blobClient()
	if _, err := blob.CreateContainer(t.Context(), "acked", nil); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := blob.UploadBuffer(t.Context(), "acked", "b"+strconv.Itoa(i), []byte("payload "+strconv.Itoa(i)), nil); err != nil {
			t.Fatalf("upload %d: %v", i, err)
		}
	}
	pid := azuritePID(dir)
	if pid == 0 {
		t.Fatal("no Azurite runs for the cloud")
	}
	p.Kill(t)
	waitGone(t, pid, "the killed cloud's Azurite")

	p = cloudtest.StartProcess(t, bin, dir)
	blob = blobClient()
	for i := range n {
		if got := download(t, blob, "acked", "b"+strconv.Itoa(i)); string(got) != "payload "+strconv.Itoa(i) {
			t.Fatalf("blob %d after kill -9: %q", i, got)
		}
	}
	pid = azuritePID(dir)
	p.Kill(t)
	if pid != 0 {
		waitGone(t, pid, "Azurite after the cloud was killed again")
	}
}

// TestCloseStopsAzurite: closing an in-process cloud stops its Azurite.
func TestCloseStopsAzurite(t *testing.T) {
	e := newEnv(t)
	blob := e.blobClient(t, e.keys[0])
	if _, err := blob.CreateContainer(t.Context(), "closing", nil); err != nil {
		t.Fatal(err)
	}
	pid := e.c.Azurite().PID()
	if pid == 0 || !alive(pid) {
		t.Fatalf("Azurite pid %d does not run", pid)
	}
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("Azurite (pid %d) still runs after the cloud closed", pid)
	}
}
