package cloud_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nodeRuntime is one Node.js the JavaScript scenario runs on.
type nodeRuntime struct {
	name  string // "node-v20.20.2", as the subtest is named
	path  string
	flags []string
}

// debianNode is Debian's Node.js as hack/install-debian-node.sh unpacks it (`make test-deps`):
// $CERULEAN_DEBIAN_NODE, else bin/debian-node/node ($CERULEAN_BIN_DIR or the repository's).
func debianNode() string {
	if p := os.Getenv("CERULEAN_DEBIAN_NODE"); p != "" {
		return p
	}
	bin := os.Getenv("CERULEAN_BIN_DIR")
	if bin == "" {
		bin = filepath.Join("..", "..", "bin") // the test runs in internal/cloud
	}
	return filepath.Join(bin, "debian-node", "node")
}

// nodeVersions are the Node.js runtimes the scenario runs on: the machine's node (v20 from the
// machine image here) and Debian's (v18 in Debian 12), once when they are the same. Without
// Debian's unpacked copy that subtest skips, naming the script that provides it.
func nodeVersions(t *testing.T) []nodeRuntime {
	t.Helper()
	v := nodeVersion(t, "node")
	out := []nodeRuntime{{name: "node-" + v, path: "node", flags: webCryptoFlag(v)}}
	if p, err := filepath.Abs(debianNode()); err == nil {
		if _, err := os.Stat(p); err == nil {
			if dv := nodeVersion(t, p); dv != v {
				out = append(out, nodeRuntime{name: "debian-node-" + dv, path: p, flags: webCryptoFlag(dv)})
			}
			return out
		}
	}
	out = append(out, nodeRuntime{name: "debian-node"})
	return out
}

// webCryptoFlag is what Node.js 18 needs for the current SDKs: they declare Node >= 20 (some
// >= 22) and use the global Web Crypto (crypto.randomUUID), which Node 18 has only behind
// --experimental-global-webcrypto. Without it they fail before sending any request.
func webCryptoFlag(version string) []string {
	if strings.HasPrefix(version, "v18.") {
		return []string{"--experimental-global-webcrypto"}
	}
	return nil
}

func nodeVersion(t *testing.T, node string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	return strings.TrimSpace(string(out))
}
