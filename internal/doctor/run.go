package doctor

import (
	"context"
	"fmt"
	"io"
)

// ExitError carries the exit code of a doctor run to main: 1 when a step failed (Err nil: the
// report said everything), 2 when something could not be checked.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process's exit code.
func (e *ExitError) ExitCode() int { return e.Code }

// CLIOptions are the flags and arguments of `cerulean doctor workload-identity`.
type CLIOptions struct {
	Namespace string
	Target    string
	Scope     string
	Getenv    func(string) string
	Out       io.Writer
}

// RunWorkloadIdentity is the command: it reads the environment, runs the steps, prints the
// report and returns nil (exit 0) or an *ExitError with code 1 or 2.
func RunWorkloadIdentity(ctx context.Context, o CLIOptions) error {
	opts, err := OptionsFromEnv(o.Getenv)
	if err != nil {
		return &ExitError{Code: ExitUncertain, Err: err}
	}
	opts.Namespace, opts.Target, opts.Scope = o.Namespace, o.Target, o.Scope
	report, err := WorkloadIdentity(ctx, opts)
	if err != nil {
		return &ExitError{Code: ExitUncertain, Err: err}
	}
	if err := report.Write(o.Out); err != nil {
		return &ExitError{Code: ExitUncertain, Err: fmt.Errorf("write report: %w", err)}
	}
	if code := report.ExitCode(); code != ExitOK {
		return &ExitError{Code: code}
	}
	return nil
}
