package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"
)

// The product binary links none of the local environment: the local cloud, the control planes
// and node, `up`, and what exists only to build or test them. A product package that imported
// one would ship a fake Azure into every cluster (and grow the image).
func TestProductLinksNoLocalEnvironment(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "github.com/cerulean/cerulean/cmd/cerulean").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const mod = "github.com/cerulean/cerulean/"
	local := []string{"internal/cloud", "internal/up", "internal/devenv", "internal/images", "internal/kubeletplugin",
		"internal/benchutil", "internal/helmchart", "internal/rollout/fleet", "internal/rollout/rollouttest", "cmd/cerulean-local", "hack", "test"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, dep := range deps {
		rel, ok := strings.CutPrefix(dep, mod)
		if !ok {
			continue
		}
		for _, l := range local {
			if rel == l || strings.HasPrefix(rel, l+"/") {
				t.Errorf("cmd/cerulean links %s (local environment)", dep)
			}
		}
		if strings.HasSuffix(path.Base(rel), "test") {
			t.Errorf("cmd/cerulean links test support package %s", dep)
		}
	}
}
