// Package helmchart runs the project's Helm chart, charts/cerulean, through bin/helm (built by
// `make tools`): rendering and decoding it, and installing it, for the tests that hold the chart
// to what users rely on.
package helmchart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/manifests"
)

// Helm runs bin/helm with its state (cache, configuration, data) in a directory of its own, never
// the user's home.
type Helm struct {
	// Bin is the helm binary.
	Bin string
	// Home holds Helm's cache, configuration and data.
	Home string
	// Kubeconfig is the cluster helm install and friends talk to; empty for template and lint.
	Kubeconfig string
}

// New finds bin/helm (devenv.DefaultBinDir) and keeps Helm's state under home.
func New(home string) (*Helm, error) {
	dir, err := devenv.DefaultBinDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("find helm: %w (run `make tools`)", err)
	}
	return &Helm{Bin: bin, Home: home}, nil
}

// ChartDir is charts/cerulean of this module.
func ChartDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("find the module root: not inside the cerulean module")
	}
	return filepath.Join(filepath.Dir(mod), "charts", "cerulean"), nil
}

// Run runs helm with args and returns its standard output; the error carries its standard error.
func (h *Helm) Run(ctx context.Context, args ...string) (string, error) {
	if h.Kubeconfig != "" {
		args = append(args, "--kubeconfig", h.Kubeconfig)
	}
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Template renders the chart as release in namespace with the --set values given.
func (h *Helm) Template(ctx context.Context, chart, release, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, chart, "--namespace", namespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := h.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	return manifests.Decode([]byte(out))
}
