// Package up runs the whole of Cerulean on one machine: the local control plane now, and the
// local cloud, the manager and the node agent in the same process as they land.
package up

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/fsutil"
)

// Options configure Run.
type Options struct {
	// DataDir keeps all state; running again on it resumes.
	DataDir string
	// BinDir holds the control-plane binaries; empty means devenv.DefaultBinDir().
	BinDir string
	// Out receives progress and the summary.
	Out io.Writer
}

// EnvFileName is written last, once everything is ready: its presence means "ready".
const EnvFileName = "env"

// Run starts everything, writes DIR/env, and runs until ctx ends or a component fails.
func Run(ctx context.Context, opts Options) error {
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data directory: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}
	envPath := filepath.Join(dataDir, EnvFileName)
	if err := os.Remove(envPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("data directory %s is unusable: %w", dataDir, err)
	}

	cp, err := devenv.Start(ctx, devenv.Options{DataDir: dataDir, BinDir: opts.BinDir, Progress: opts.Out})
	if err != nil {
		return err
	}
	defer func() {
		// The env file must not outlive what it describes.
		_ = os.Remove(envPath)
		fmt.Fprintln(opts.Out, "stopping…")
		cp.Stop()
	}()

	env := []envVar{{"KUBECONFIG", cp.Kubeconfig}}
	if err := fsutil.WriteFileAtomic(envPath, []byte(renderEnv(env)), 0o600); err != nil {
		return err
	}
	printSummary(opts.Out, cp, envPath)

	exited, which := cp.Exited()
	select {
	case <-ctx.Done():
		return nil
	case <-exited:
		return which()
	}
}

type envVar struct{ name, value string }

func renderEnv(vars []envVar) string {
	var b strings.Builder
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", v.name, shellQuote(v.value))
	}
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+,=-]+$`)

// shellQuote quotes a value for a POSIX shell unless it needs none.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func printSummary(out io.Writer, cp *devenv.ControlPlane, envPath string) {
	fmt.Fprintf(out, `
Cerulean is up.
  kube-apiserver      %s
  issuer (OIDC)       %s
  kubeconfig          %s
  logs                %s

Use it:
  source %s
  bin/kubectl get namespaces

Ctrl-C stops everything; run again with the same --data-dir to resume.
`, cp.APIServerURL, cp.IssuerURL, cp.Kubeconfig, filepath.Join(cp.DataDir, "logs"), envPath)
}
