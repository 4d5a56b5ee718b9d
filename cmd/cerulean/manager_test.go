package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The proxy sidecar's images reach the manager from its flags or from upstream's variables, a
// flag winning; a pair that cannot work stops the manager before it starts, naming what to set.
func TestManagerProxyImages(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag alone", nil, []string{"--proxy-image", "reg/proxy:v1"}, "set both --proxy-image (PROXY_IMAGE) and --proxy-init-image (PROXY_INIT_IMAGE)"},
		{"variable alone", map[string]string{"PROXY_INIT_IMAGE": "reg/proxy-init:v1"}, nil, `got "" and "reg/proxy-init:v1"`},
		{"an empty flag wins", map[string]string{"PROXY_IMAGE": "reg/proxy:v1", "PROXY_INIT_IMAGE": "reg/proxy-init:v1"},
			[]string{"--proxy-init-image="}, `got "reg/proxy:v1" and ""`},
		{"a flag wins", map[string]string{"PROXY_IMAGE": "reg/proxy:v1"}, []string{"--proxy-image", "", "--proxy-init-image", "x y"}, `"x y" is not an image reference`},
		// A valid pair lets the manager go on, to the kubeconfig it cannot read.
		{"both", map[string]string{"PROXY_IMAGE": "reg/proxy:v1"}, []string{"--proxy-init-image", "reg/proxy-init:v1"}, "load kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PROXY_IMAGE", tc.env["PROXY_IMAGE"])
			t.Setenv("PROXY_INIT_IMAGE", tc.env["PROXY_INIT_IMAGE"])
			cmd := newRootCommand()
			cmd.SetArgs(append([]string{"manager", "--kubeconfig", missing, "--webhook-port", "9443", "--metrics-addr", "0", "--health-addr", "0"}, tc.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one with %q", err, tc.want)
			}
		})
	}
}
