// Package devenvtest gives an integration-test binary one real control plane, started in TestMain
// on free ports in a temporary directory and stopped when the tests end.
package devenvtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/cerulean/cerulean/internal/devenv"
)

var shared *devenv.ControlPlane

// Main starts the control plane, runs the tests and stops it. Use it as the whole of TestMain:
//
//	func TestMain(m *testing.M) { devenvtest.Main(m) }
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cerulean-devenv-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = devenv.Start(context.Background(), devenv.Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenvtest: start control plane:", err)
		return 1
	}
	defer shared.Stop()
	return m.Run()
}

// ControlPlane returns the control plane Main started.
func ControlPlane(t testing.TB) *devenv.ControlPlane {
	t.Helper()
	if shared == nil {
		t.Fatal("devenvtest: no control plane; call devenvtest.Main from TestMain")
	}
	return shared
}
