package nodeagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

// TestMain is the real control plane for the tests, or, when the test binary is re-executed
// inside a pod's network namespace, the pod's process.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CERULEAN_POD_HELPER"); mode != "" {
		os.Exit(podProcess(mode))
	}
	devenvtest.Main(m)
}

// podProcess is what runs in a pod. "keyvault": the Azure SDK's ManagedIdentityCredential (IMDS
// at 169.254.169.254, no override) and azsecrets read SECRET from VAULT; it prints the value.
// "get": N plain GETs of URL with Metadata: true; it prints the last status and body as JSON.
func podProcess(mode string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	switch mode {
	case "keyvault":
		opts := &azidentity.ManagedIdentityCredentialOptions{}
		if id := os.Getenv("CLIENT_ID"); id != "" {
			opts.ID = azidentity.ClientID(id)
		}
		cred, err := azidentity.NewManagedIdentityCredential(opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c, err := azsecrets.NewClient(os.Getenv("VAULT"), cred, &azsecrets.ClientOptions{DisableChallengeResourceVerification: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		s, err := c.GetSecret(ctx, os.Getenv("SECRET"), "", nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Print(*s.Value)
		return 0
	case "get":
		n, _ := strconv.Atoi(os.Getenv("N"))
		n = max(n, 1)
		var out struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil}}
		for range n {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, os.Getenv("URL"), nil)
			if os.Getenv("NO_METADATA") == "" {
				req.Header.Set("Metadata", "true")
			}
			resp, err := client.Do(req)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out.Status, out.Body = resp.StatusCode, nil
			_ = json.Unmarshal(b, &out.Body)
		}
		_ = json.NewEncoder(os.Stdout).Encode(out)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 2
}
