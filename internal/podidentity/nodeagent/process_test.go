package nodeagent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/metricstest"
)

// `cerulean node-agent` as a process: its flags reach the agent, it serves, refuses a caller
// that is no pod, and on SIGTERM exits 0 having removed its nftables table (as root).
func TestNodeAgentCommand(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	c := cloudtest.Start(t, cloud.Options{})
	bin := cloudtest.BuildCerulean(t)
	headerFile := filepath.Join(t.TempDir(), "header")
	if err := os.WriteFile(headerFile, []byte("not-a-real-header\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := mln.Addr().String()
	_ = mln.Close()
	args := []string{"node-agent", "--node-name", "cmd-node", "--kubeconfig", cp.Kubeconfig, "--listen", addr, "--metrics-addr", metricsAddr,
		"--imds-endpoint", c.Settings().URL, "--ca-file", c.Settings().CAFile, "--identity-header-file", headerFile,
		"--authority-host", c.Settings().AuthorityHost}
	table := ""
	if os.Geteuid() == 0 && exec.Command("nft", "list", "tables").Run() == nil {
		table = "cerulean-nmi-c" + tag()
		// An interface pattern that matches nothing on this machine.
		args = append(args, "--pod-interfaces", "cvhnone"+tag()+"+", "--node-ip", "127.0.0.1", "--nft-table", table)
	} else {
		args = append(args, "--pod-interfaces", "")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if table != "" {
			if left := leftovers("\x00", table); len(left) > 0 {
				t.Errorf("left behind: %v", left)
				// A killed agent (a failed test) leaves its table: the machine is left as found.
				_ = exec.Command("nft", "delete", "table", "ip", table).Run()
			}
		}
	})
	serving, readDone := make(chan struct{}), make(chan struct{})
	var logs strings.Builder // written by the reader until readDone
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if !closed && strings.Contains(sc.Text(), "Node agent serving") {
				close(serving)
				closed = true
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-serving:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-readDone
		t.Fatalf("the agent did not start: %s", logs.String())
	}
	if table != "" {
		if out, err := exec.Command("nft", "list", "table", "ip", table).CombinedOutput(); err != nil || !strings.Contains(string(out), "dnat to "+addr) {
			t.Fatalf("table %s not installed with a DNAT to %s: %v\n%s", table, addr, err, out)
		}
	}
	// This test is the host: a host caller on the pod path is refused in IMDS's error shape.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metadata/identity/oauth2/token?resource=x", nil)
	req.Header.Set("Metadata", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || body["error"] != "forbidden" || body["error_description"] == "" {
		t.Fatalf("host caller: %d %v", resp.StatusCode, body)
	}
	// --authority-host and --ca-file reach the service-principal credentials: a pod bound to a
	// type-1 identity gets its token from the cloud's Entra ID.
	clientID := servicePrincipalPod(t, c, cp.RESTConfig, "cmd-node", "cmd-sp")
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/host/token/?resource=https%3A%2F%2Fvault.azure.net", nil)
	req.Header.Set("podname", "app")
	req.Header.Set("podns", "cmd-sp")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var hostBody map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&hostBody)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || hostBody["clientid"] != clientID {
		t.Fatalf("service principal's token through the command: %d %v", resp.StatusCode, hostBody)
	}
	// --metrics-addr serves aad-pod-identity's NMI series: the refusal on the pod route (no
	// pod: no namespace) and the token for the pod of cmd-sp, got from Entra ID.
	scraped, err := metricstest.Scrape("http://" + metricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{nmiCount, []string{`operation_type="/metadata/identity/oauth2/token"`, `status_code="403"`, `namespace=""`, `resource=""`}},
		{nmiCount, []string{`operation_type="/host/token/"`, `status_code="200"`, `namespace="cmd-sp"`, `resource="https://vault.azure.net"`}},
		{"aadpodidentity_imds_operations_duration_seconds_count", []string{`operation_type="adal_token"`}},
	} {
		if got := metricstest.Sum(scraped, c.name, c.labels...); got != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, got)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-readDone // the agent closed its stderr: it exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
	if table != "" {
		if left := leftovers("\x00", table); len(left) > 0 {
			t.Fatalf("after exit: %v", left)
		}
	}
	if strings.Contains(logs.String(), "not-a-real-header") {
		t.Fatal("the identity header appears in the logs")
	}
}
