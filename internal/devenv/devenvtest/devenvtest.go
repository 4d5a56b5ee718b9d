// Package devenvtest gives an integration-test binary one real control plane, started in TestMain
// on free ports in a temporary directory and stopped when the tests end; with WithNode, also the
// local node (containerd, kubelet, kube-scheduler) with the test images imported.
package devenvtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
)

var (
	shared     *devenv.ControlPlane
	sharedNode *devenv.Node
	noNode     string // why there is no node, when one was asked for
)

// TestProviderID is the node's providerID in tests: a VMSS instance id of the shape the local
// cloud's compute provider serves.
const TestProviderID = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/MC_cerulean_cerulean-local_local/providers/Microsoft.Compute/virtualMachineScaleSets/aks-nodepool1-vmss/virtualMachines/0"

// NodeLockWait bounds the wait for another package's node: one node runs on a machine at a time,
// and `go test ./...` runs packages in parallel.
const NodeLockWait = 20 * time.Minute

type config struct {
	node   bool
	images []string
}

// Option changes what Main starts.
type Option func(*config)

// WithNode starts the local node too, with the pause and test-app images (and any others named)
// built from this module and imported. Without root the node is not started and Node skips the
// tests that ask for it.
func WithNode(extraImages ...string) Option {
	return func(c *config) {
		c.node = true
		c.images = append(c.images, extraImages...)
	}
}

// Main starts the control plane, runs the tests and stops it. Use it as the whole of TestMain:
//
//	func TestMain(m *testing.M) { devenvtest.Main(m) }
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts []Option) int {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	// Short: the node's containerd socket lives below it and socket paths are limited.
	dir, err := os.MkdirTemp("", "cerulean-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	shared, err = devenv.Start(ctx, devenv.Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest: start control plane:", err)
		return 1
	}
	defer shared.Stop()
	if cfg.node {
		if code := startNode(ctx, dir, cfg); code != 0 {
			return code
		}
	}
	code := m.Run()
	if sharedNode != nil {
		if err := stopNode(dir); err != nil {
			fmt.Fprintln(os.Stderr, "devenvtest:", err)
			code = 1
		}
	}
	return code
}

func startNode(ctx context.Context, dir string, cfg config) int {
	if os.Geteuid() != 0 {
		noNode = "the local node needs root (CI runs as root)"
		return 0
	}
	archives, err := images.Build(ctx, images.Options{
		OutDir: filepath.Join(dir, "images"),
		Only:   append([]string{images.Pause, images.TestApp}, cfg.images...),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest: build images:", err)
		return 1
	}
	node, err := shared.StartNode(ctx, devenv.NodeOptions{
		ProviderID: TestProviderID,
		Images:     archives,
		LockWait:   NodeLockWait,
		Progress:   os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest: start node:", err)
		return 1
	}
	sharedNode = node
	return 0
}

// stopNode stops the node and fails the test binary if anything of it is left on the machine.
func stopNode(dir string) error {
	if err := sharedNode.Stop(); err != nil {
		return err
	}
	if left := devenv.NodeLeftovers(dir); len(left) > 0 {
		return fmt.Errorf("the node left behind: %s", strings.Join(left, "; "))
	}
	return nil
}

// ControlPlane returns the control plane Main started.
func ControlPlane(t testing.TB) *devenv.ControlPlane {
	t.Helper()
	if shared == nil {
		t.Fatal("devenvtest: no control plane; call devenvtest.Main from TestMain")
	}
	return shared
}

// Node returns the node Main started with WithNode, or skips the test when it could not run here.
func Node(t testing.TB) *devenv.Node {
	t.Helper()
	if sharedNode == nil {
		if noNode != "" {
			t.Skip("no local node: " + noNode)
		}
		t.Fatal("devenvtest: no node; call devenvtest.Main(m, devenvtest.WithNode()) from TestMain")
	}
	return sharedNode
}

// EtcdValue reads a key straight from etcd at etcdURL (its JSON gateway), bypassing
// kube-apiserver: what a Secret looks like at rest.
func EtcdValue(t testing.TB, etcdURL, key string) []byte {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q}`, base64.StdEncoding.EncodeToString([]byte(key)))
	res, err := http.Post(etcdURL+"/v3/kv/range", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct {
		Kvs []struct {
			Value []byte `json:"value"`
		} `json:"kvs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || len(out.Kvs) != 1 {
		t.Fatalf("etcd %s: %v, %d values", key, err, len(out.Kvs))
	}
	return out.Kvs[0].Value
}
