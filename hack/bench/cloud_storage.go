package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/cerulean/cerulean/internal/cloud"
)

func init() {
	register(section{title: "Local cloud: storage data planes (Azurite behind the front)", run: benchCloudStorage})
}

// benchCloudStorage measures blob upload and download throughput with azblob through the
// cloud's front (the proxy, the front's authorization, the forward to Azurite) against the same
// client talking to Azurite directly, and Azurite's idle memory.
func benchCloudStorage(ctx context.Context, env benchEnv) ([]row, error) {
	c, err := startCloud(ctx, env, "cloud-storage", cloud.Options{ProxyAddr: "0", AzuriteDir: filepath.Join(env.binDir, "azurite")})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	front, direct, err := benchStorageClients(ctx, c)
	if err != nil {
		return nil, err
	}
	// The median of 3 of each, one client after the other on the same machine.
	payload := bytes.Repeat([]byte("0123456789abcdef"), blobPayloadSize/16)
	dUp, dDown, err := measureBlobThroughput(ctx, direct, "direct", payload)
	if err != nil {
		return nil, fmt.Errorf("azurite direct: %w", err)
	}
	fUp, fDown, err := measureBlobThroughput(ctx, front, "front", payload)
	if err != nil {
		return nil, fmt.Errorf("through the front: %w", err)
	}
	// Idle: nothing asked of Azurite for a while.
	time.Sleep(5 * time.Second)
	rss, err := rssMiB(c.Azurite().PID())
	if err != nil {
		return nil, err
	}
	return storageRows(dUp, dDown, fUp, fDown, rss), nil
}

// benchStorageAccount is the account both clients of benchCloudStorage use.
const benchStorageAccount = "stbench"

// benchStorageClients creates the bench storage account through ARM and returns two blob clients
// of it with its key: front (through the cloud's proxy and front) and direct (straight to
// Azurite), after creating the container "bench" that both use.
func benchStorageClients(ctx context.Context, c *cloud.Cloud) (front, direct *azblob.Client, err error) {
	key, err := createBenchStorageAccount(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	proxyURL, err := url.Parse(c.Settings().ProxyURL)
	if err != nil {
		return nil, nil, err
	}
	tr := c.Transport()
	tr.Proxy = http.ProxyURL(proxyURL)
	frontCred, err := azblob.NewSharedKeyCredential(benchStorageAccount, key)
	if err != nil {
		return nil, nil, err
	}
	front, err = azblob.NewClientWithSharedKeyCredential("https://"+benchStorageAccount+".blob.core.windows.net/", frontCred,
		&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}}})
	if err != nil {
		return nil, nil, err
	}
	endpoint, err := c.Azurite().Endpoint(ctx, "blob")
	if err != nil {
		return nil, nil, err
	}
	directCred, err := azblob.NewSharedKeyCredential(benchStorageAccount, base64.StdEncoding.EncodeToString(c.Azurite().Key()))
	if err != nil {
		return nil, nil, err
	}
	direct, err = azblob.NewClientWithSharedKeyCredential(endpoint+"/"+benchStorageAccount+"/", directCred, nil)
	if err != nil {
		return nil, nil, err
	}
	if _, err := front.CreateContainer(ctx, "bench", nil); err != nil {
		return nil, nil, err
	}
	return front, direct, nil
}

// createBenchStorageAccount creates rg-bench and the bench storage account in it as the owner,
// and returns the account's first key.
func createBenchStorageAccount(ctx context.Context, c *cloud.Cloud) (string, error) {
	s := c.Settings()
	armOpts := &arm.ClientOptions{ClientOptions: c.ClientOptions()}
	cred, err := ownerCred(c, c.ClientOptions())
	if err != nil {
		return "", err
	}
	if err := createBenchGroup(ctx, s, cred, armOpts); err != nil {
		return "", err
	}
	accounts, err := armstorage.NewAccountsClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return "", err
	}
	poller, err := accounts.BeginCreate(ctx, "rg-bench", benchStorageAccount, armstorage.AccountCreateParameters{
		Location: to.Ptr("eastus"), SKU: &armstorage.SKU{Name: to.Ptr(armstorage.SKUNameStandardLRS)},
	}, nil)
	if err != nil {
		return "", err
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second}); err != nil {
		return "", err
	}
	keys, err := accounts.ListKeys(ctx, "rg-bench", benchStorageAccount, nil)
	if err != nil {
		return "", err
	}
	return *keys.Keys[0].Value, nil
}

// blobPayloadSize is the size of the blob benchCloudStorage uploads and downloads.
const blobPayloadSize = 64 << 20

// measureBlobThroughput uploads payload (blobPayloadSize bytes) as the blob name in the
// container "bench" and downloads it, three times with c, and returns the median upload and
// download throughputs, in MB/s.
func measureBlobThroughput(ctx context.Context, c *azblob.Client, name string, payload []byte) (up, down float64, err error) {
	mbps := func(d time.Duration) float64 { return float64(blobPayloadSize) / (1 << 20) / d.Seconds() }
	var ups, downs []float64
	for range 3 {
		start := time.Now()
		if _, err := c.UploadBuffer(ctx, "bench", name, payload, nil); err != nil {
			return 0, 0, fmt.Errorf("upload: %w", err)
		}
		ups = append(ups, mbps(time.Since(start)))
		start = time.Now()
		resp, err := c.DownloadStream(ctx, "bench", name, nil)
		if err != nil {
			return 0, 0, fmt.Errorf("download: %w", err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || n != blobPayloadSize {
			return 0, 0, fmt.Errorf("download: %d bytes, %w", n, err)
		}
		downs = append(downs, mbps(time.Since(start)))
	}
	slices.Sort(ups)
	slices.Sort(downs)
	return ups[1], downs[1], nil
}

// storageRows is benchCloudStorage's table: the direct and front throughputs (MB/s) and
// Azurite's idle RSS (MiB).
func storageRows(dUp, dDown, fUp, fDown, rss float64) []row {
	mb := func(v float64) string { return fmt.Sprintf("%.0f MB/s", v) }
	return []row{
		{benchmark: "blob upload 64 MiB (azblob defaults), Azurite directly", result: mb(dUp)},
		{benchmark: "blob upload 64 MiB, through the proxy and the front", result: mb(fUp), vsBaseline: ratio(fUp, dUp) + " of direct (target ≥ 0.8×)"},
		{benchmark: "blob download 64 MiB, Azurite directly", result: mb(dDown)},
		{benchmark: "blob download 64 MiB, through the proxy and the front", result: mb(fDown), vsBaseline: ratio(fDown, dDown) + " of direct (target ≥ 0.8×)"},
		{benchmark: "Azurite RSS, idle after the above", result: fmt.Sprintf("%.0f MiB", rss), vsBaseline: "budget 150 MiB"},
	}
}

// rssMiB is the resident set of pid, from /proc.
func rssMiB(pid int) (float64, error) {
	kb, ok := procKiB(pid, "status", "VmRSS")["VmRSS"]
	if !ok {
		return 0, fmt.Errorf("no VmRSS for pid %d: is it running?", pid)
	}
	return float64(kb) / 1024, nil
}
