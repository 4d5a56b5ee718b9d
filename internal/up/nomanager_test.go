package up_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cerulean/cerulean/internal/up"
)

// With NoManager (--no-manager) up registers no webhook configuration and installs no CRD of
// its own, so the Helm chart's, which have the same names, install on the local cluster as on
// AKS; the ConfigMaps the chart's values and the samples read are still written.
func TestUpWithoutManager(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cs, out := startUp(t, up.Options{DataDir: dir, CloudAddr: "127.0.0.1:0", Clusters: 1, NoManager: true})
	ctx := t.Context()
	envFile := filepath.Join(dir, up.EnvFileName)
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "--no-manager") {
		t.Errorf("up's progress does not say the manager is left out:\n%s", out)
	}
	for _, c := range m.Items {
		t.Errorf("up --no-manager registered the mutating webhook configuration %s", c.Name)
	}
	for _, c := range v.Items {
		t.Errorf("up --no-manager registered the validating webhook configuration %s", c.Name)
	}
	groups, err := cs.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if strings.HasSuffix(g.Name, ".azure.com") || strings.HasSuffix(g.Name, "cerulean.dev") {
			t.Errorf("up --no-manager installed CRDs of %s", g.Name)
		}
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, up.CloudCAConfigMap, metav1.GetOptions{}); err != nil {
		t.Errorf("the local cloud's CA ConfigMap: %v", err)
	}
	env, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CERULEAN_CSI_PROVIDER_SOCKET", "CERULEAN_MANAGER_METRICS_URL", "CERULEAN_NODE_AGENT_METRICS_URL"} {
		if strings.Contains(string(env), name) {
			t.Errorf("DIR/env names %s, but nothing serves it: %s", name, env)
		}
	}
}

// startUp runs up with opts until it is ready (DIR/env written) and returns a client of its
// cluster and its progress; up stops when the test ends, and must stop cleanly.
func startUp(t *testing.T, opts up.Options) (kubernetes.Interface, *syncWriter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	out := &syncWriter{b: &strings.Builder{}}
	opts.Out = out
	go func() { done <- up.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("up: %v", err)
		}
	})
	envFile := filepath.Join(opts.DataDir, up.EnvFileName)
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			done <- err
			return false, err
		default:
		}
		_, err := os.Stat(envFile)
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("up never became ready: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(opts.DataDir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, out
}

// syncWriter keeps up's progress for a failure's message, written from up's goroutine.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
