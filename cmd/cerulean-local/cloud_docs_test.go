package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/testenv"
)

// shellBlocks returns the ```sh blocks of a Markdown file, except those marked "# (untested)"
// and, without the Azure CLI, those marked "# requires az".
func shellBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```sh":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			s := cur.String()
			switch {
			case strings.HasPrefix(s, "# (untested)"):
			case strings.HasPrefix(s, "# requires az"):
				if _, err := exec.LookPath("az"); err == nil {
					blocks = append(blocks, s)
				} else {
					t.Log("az is not installed: skipping the Azure CLI block")
				}
			default:
				blocks = append(blocks, s)
			}
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// TestDocsCloud runs every tested shell block of docs/cloud.md, in order, in one shell, with the
// freshly built binary first on PATH.
func TestDocsCloud(t *testing.T) {
	testenv.Tools(t, "hack/install-test-deps.sh (make test-deps)", "bash", "curl", "jq")
	blocks := shellBlocks(t, filepath.Join("..", "..", "docs", "cloud.md"))
	if len(blocks) < 4 {
		t.Fatalf("found %d shell blocks in docs/cloud.md", len(blocks))
	}
	bin := cloudtest.BuildCeruleanLocal(t)
	work := t.TempDir()
	// A failing block must not leave the background cloud holding the output pipe open.
	script := "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + strings.Join(blocks, "\n")
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"),
		"CERULEAN_CLOUD_DATA_DIR="+filepath.Join(work, "cloud"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 30 * time.Second // a bound, not an assertion: Wait returns even if a child keeps the pipe
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }) // the group this test started
	if err := cmd.Wait(); err != nil {
		t.Fatalf("docs/cloud.md shell blocks failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "https://127.0.0.1:") {
		t.Errorf("expected the authority host in the output:\n%s", out.String())
	}
}
