package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	s := c.Settings()
	armOpts := &arm.ClientOptions{ClientOptions: c.ClientOptions()}
	cred, err := ownerCred(c, c.ClientOptions())
	if err != nil {
		return nil, err
	}
	if err := createBenchGroup(ctx, s, cred, armOpts); err != nil {
		return nil, err
	}
	accounts, err := armstorage.NewAccountsClient(s.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	const account = "stbench"
	poller, err := accounts.BeginCreate(ctx, "rg-bench", account, armstorage.AccountCreateParameters{
		Location: to.Ptr("eastus"), SKU: &armstorage.SKU{Name: to.Ptr(armstorage.SKUNameStandardLRS)},
	}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Second}); err != nil {
		return nil, err
	}
	keys, err := accounts.ListKeys(ctx, "rg-bench", account, nil)
	if err != nil {
		return nil, err
	}
	proxyURL, err := url.Parse(s.ProxyURL)
	if err != nil {
		return nil, err
	}
	tr := c.Transport()
	tr.Proxy = http.ProxyURL(proxyURL)
	frontCred, err := azblob.NewSharedKeyCredential(account, *keys.Keys[0].Value)
	if err != nil {
		return nil, err
	}
	front, err := azblob.NewClientWithSharedKeyCredential("https://"+account+".blob.core.windows.net/", frontCred,
		&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: &http.Client{Transport: tr}}})
	if err != nil {
		return nil, err
	}
	endpoint, err := c.Azurite().Endpoint(ctx, "blob")
	if err != nil {
		return nil, err
	}
	directCred, err := azblob.NewSharedKeyCredential(account, base64.StdEncoding.EncodeToString(c.Azurite().Key()))
	if err != nil {
		return nil, err
	}
	direct, err := azblob.NewClientWithSharedKeyCredential(endpoint+"/"+account+"/", directCred, nil)
	if err != nil {
		return nil, err
	}
	if _, err := front.CreateContainer(ctx, "bench", nil); err != nil {
		return nil, err
	}

	const size = 64 << 20
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	mbps := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	// The median of 3 of each, alternating so that both see the same machine.
	measure := func(c *azblob.Client, name string) (up, down float64, err error) {
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
			if err != nil || n != size {
				return 0, 0, fmt.Errorf("download: %d bytes, %w", n, err)
			}
			downs = append(downs, mbps(time.Since(start)))
		}
		slices.Sort(ups)
		slices.Sort(downs)
		return ups[1], downs[1], nil
	}
	dUp, dDown, err := measure(direct, "direct")
	if err != nil {
		return nil, fmt.Errorf("azurite direct: %w", err)
	}
	fUp, fDown, err := measure(front, "front")
	if err != nil {
		return nil, fmt.Errorf("through the front: %w", err)
	}
	// Idle: nothing asked of Azurite for a while.
	time.Sleep(5 * time.Second)
	rss, err := rssMiB(c.Azurite().PID())
	if err != nil {
		return nil, err
	}
	mb := func(v float64) string { return fmt.Sprintf("%.0f MB/s", v) }
	return []row{
		{benchmark: "blob upload 64 MiB (azblob defaults), Azurite directly", result: mb(dUp)},
		{benchmark: "blob upload 64 MiB, through the proxy and the front", result: mb(fUp), vsBaseline: ratio(fUp, dUp) + " of direct (target ≥ 0.8×)"},
		{benchmark: "blob download 64 MiB, Azurite directly", result: mb(dDown)},
		{benchmark: "blob download 64 MiB, through the proxy and the front", result: mb(fDown), vsBaseline: ratio(fDown, dDown) + " of direct (target ≥ 0.8×)"},
		{benchmark: "Azurite RSS, idle after the above", result: fmt.Sprintf("%.0f MiB", rss), vsBaseline: "budget 150 MiB"},
	}, nil
}

// rssMiB is the resident set of pid, from /proc.
func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read azurite status: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
