package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// `cloud env --compute` prints the three identity variables for the resource and nothing else
// (never the bootstrap principal's credentials), while the cloud runs.
func TestCloudEnvCompute(t *testing.T) {
	dir := t.TempDir()
	c := cloudtest.Start(t, cloud.Options{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	s := c.Settings()
	vm := "/subscriptions/" + s.SubscriptionID + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1"

	run := func(args ...string) (string, error) {
		cmd := newCloudEnvCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(t.Context())
		return out.String(), err
	}
	out, err := run("--data-dir", dir, "--compute", vm)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
		names = append(names, name)
	}
	if strings.Join(names, ",") != "IDENTITY_ENDPOINT,IDENTITY_HEADER,SSL_CERT_FILE" {
		t.Fatalf("printed %q", out)
	}
	if strings.Contains(out, s.ClientSecret) || strings.Contains(out, "AZURE_") {
		t.Fatal("compute env carries the bootstrap credentials")
	}
	if _, err := run("--data-dir", dir, "--compute", "/subscriptions/"+s.SubscriptionID+"/resourceGroups/rg"); err == nil {
		t.Fatal("a resource group was accepted as compute")
	}
}
