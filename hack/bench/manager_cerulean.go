package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/manifests"
)

// Cerulean's manager as users run it: `cerulean manager`, built from this source tree, its CRDs
// from config/crd/bases, with the same environment as ASO (the cloud's proxy, the bootstrap
// principal, AZURE_SYNC_PERIOD, AZURE_TARGET_NAMESPACES).

type ceruleanState struct {
	me        *managerEnv
	dir       string
	installed []*unstructured.Unstructured
}

func ceruleanManager(me *managerEnv) *peerManager {
	s := &ceruleanState{me: me, dir: filepath.Join(me.scratch, "cerulean-manager")}
	return &peerManager{name: "cerulean", install: s.install, start: s.start, uninstall: s.uninstall}
}

// install applies config/crd/bases server-side, every kind's as the manager runs them all, and
// waits until the CRDs are Established.
func (s *ceruleanState) install(ctx context.Context, _ map[string]bool) error {
	files, err := filepath.Glob(filepath.Join("config", "crd", "bases", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in config/crd/bases (run from the repository's root)")
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		docs, err := manifests.ReadFile(f)
		if err != nil {
			return err
		}
		objs = append(objs, docs...)
	}
	for _, u := range objs {
		if err := applyObject(ctx, s.me, u); err != nil {
			return err
		}
		s.installed = append(s.installed, u)
	}
	return waitEstablished(ctx, s.me, objs)
}

// start builds cmd/cerulean into the scratch directory (the binary measured is this tree's) and
// runs `cerulean manager` for namespace ns.
func (s *ceruleanState) start(ctx context.Context, ns string) (*managerProcess, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	// By default a namespace's resources stay inside the ARM scopes a NamespaceGrant gives it:
	// the subscription, as a cluster admin trusting the namespace would (ASO trusts every one).
	grant := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cerulean.dev/v1alpha1", "kind": "NamespaceGrant",
		"metadata": map[string]any{"name": "bench-" + ns},
		"spec":     map[string]any{"namespaces": []any{ns}, "scopes": []any{"/subscriptions/*"}},
	}}
	_, err := s.me.dyn.Resource(gvrOf(grant)).Create(ctx, grant, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("grant %s its ARM scopes: %w", ns, err)
	}
	// Built as the product image builds it (and as hack/tools builds ASO's): static. The go
	// command's default here links cgo and the dynamic loader, a binary no user runs, whose
	// mapped pages were 20 MiB more of the manager's RSS at 10,000 objects.
	bin := filepath.Join(s.dir, "cerulean")
	if err := images.GoBuild(ctx, ".", "./cmd/cerulean", bin, "", nil); err != nil {
		return nil, fmt.Errorf("build cerulean: %w", err)
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(proxyEnv(s.me.cloud),
		"AZURE_TARGET_NAMESPACES="+ns,
		"AZURE_SYNC_PERIOD="+mgrSync.String(),
	)
	args := []string{"manager",
		"--kubeconfig=" + s.me.cp.Kubeconfig,
		"--health-addr=127.0.0.1:" + strconv.Itoa(health),
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(metrics),
		"--profiling", // for a heap profile at scale (docs/benchmarks.md): idle unless asked
	}
	if *mgrVerbose {
		args = append(args, "--v")
	}
	p, err := startProcess(bin, args, env, filepath.Join(s.dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, p, fmt.Sprintf("http://127.0.0.1:%d/readyz", health)); err != nil {
		p.stop()
		return nil, err
	}
	p.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	return p, nil
}

func (s *ceruleanState) uninstall(ctx context.Context) error {
	return deleteInstalled(ctx, s.me, s.installed)
}
