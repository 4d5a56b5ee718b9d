package rollout

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cerulean/cerulean/internal/azure"
)

// ErrClustersFailed is the error of a run in which a cluster failed: the table says which and
// why, so main prints nothing more and exits 1.
type ErrClustersFailed struct{ N int }

func (e ErrClustersFailed) Error() string { return fmt.Sprintf("%d cluster(s) failed", e.N) }

// ExitCode is the process's exit code.
func (e ErrClustersFailed) ExitCode() int { return 1 }

// CLIOptions are the flags of `cerulean rollout`.
type CLIOptions struct {
	File     string
	Parallel int
	DryRun   bool
	// DeployTimeout and VerifyTimeout: see Options; 0 means their defaults.
	DeployTimeout, VerifyTimeout time.Duration
	Getenv                       func(string) string
	// Out gets the plan or the table; Progress the per-step lines.
	Out, Progress io.Writer
}

// RunCLI is `cerulean rollout -f FILE`: it prints the plan (--dry-run) or runs the rollout,
// prints the table and returns ErrClustersFailed when a cluster failed.
func RunCLI(ctx context.Context, o CLIOptions) error {
	cfg, err := Load(o.File)
	if err != nil {
		return err
	}
	if o.DryRun {
		return Plan(o.Out, cfg)
	}
	report, err := Run(ctx, Options{Config: cfg, Azure: azure.ConfigFromEnv(o.Getenv), Parallel: o.Parallel, Progress: o.Progress,
		DeployTimeout: o.DeployTimeout, VerifyTimeout: o.VerifyTimeout,
	})
	if werr := report.WriteTable(o.Out); werr != nil && err == nil {
		err = fmt.Errorf("write table: %w", werr)
	}
	if err != nil {
		return err
	}
	n := 0
	for _, c := range report.Clusters {
		if c.Failed() {
			n++
		}
	}
	if n > 0 {
		return ErrClustersFailed{N: n}
	}
	return nil
}

// RevokeCLIOptions are the flags of `cerulean rollout revoke`.
type RevokeCLIOptions struct {
	File    string
	Cluster string
	Getenv  func(string) string
	Out     io.Writer
}

// RunRevokeCLI is `cerulean rollout revoke -f FILE --cluster NAME`.
func RunRevokeCLI(ctx context.Context, o RevokeCLIOptions) error {
	cfg, err := Load(o.File)
	if err != nil {
		return err
	}
	removed, err := Revoke(ctx, RevokeOptions{Config: cfg, Azure: azure.ConfigFromEnv(o.Getenv), Cluster: o.Cluster})
	if err != nil {
		return err
	}
	if removed {
		_, err = fmt.Fprintf(o.Out, "%s: removed its %q role assignment on %s\n", o.Cluster, cfg.Role, cfg.KeyVault.id.Name)
	} else {
		_, err = fmt.Fprintf(o.Out, "%s: no role assignment to remove\n", o.Cluster)
	}
	return err
}
