package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/doctor"
)

// The flags reach the doctor, and what it cannot check exits 2 with the reason.
func TestDoctorCommandExitCodes(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"+
		"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "workload-identity", "-n", "shop", "deployment/shop"}, "want pod/NAME or sa/NAME"},
		{[]string{"doctor", "workload-identity", "--namespace", "shop", "pod/shop"}, "cannot read pod shop/shop"},
	} {
		cmd := newRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(tc.args)
		err := cmd.ExecuteContext(t.Context())
		var ee *doctor.ExitError
		if !errors.As(err, &ee) || ee.Code != doctor.ExitUncertain {
			t.Errorf("%v: err %v, want exit code 2", tc.args, err)
			continue
		}
		if got := out.String() + err.Error(); !strings.Contains(got, tc.want) {
			t.Errorf("%v: output %q lacks %q", tc.args, got, tc.want)
		}
	}
}
