// Package doctor explains, step by step, why a pod (or any pod of a service account) can or
// cannot get an Azure token through workload identity: the label, the service account's
// annotations, the webhook's mutation, the cluster's issuer, the identity and its federated
// credentials compared with what the pod presents, a real token exchange, and the role
// assignments at a scope. Each failing step says how to fix it.
package doctor

import (
	"fmt"
	"io"
	"strings"
)

// Status of a step.
type Status string

// Statuses. Error means the step could not be checked (no access, not reachable).
const (
	Pass  Status = "PASS"
	Fail  Status = "FAIL"
	Skip  Status = "SKIP"
	Error Status = "ERROR"
)

// Step names, in the order they run. Tests and scripts may rely on them.
const (
	StepLabel               = "label"
	StepServiceAccount      = "service-account"
	StepMutation            = "mutation"
	StepIssuer              = "issuer"
	StepIdentity            = "identity"
	StepFederatedCredential = "federated-credential"
	StepTokenExchange       = "token-exchange"
	StepRoleAssignments     = "role-assignments"
)

// Step is one check and its outcome.
type Step struct {
	Name   string
	Status Status
	Detail string // what was found
	Fix    string // for Fail: what to do
}

// Report is the outcome of every step.
type Report struct {
	Subject string // "pod NS/NAME (service account NS/SA)" or "service account NS/SA"
	Steps   []Step
}

// Exit codes of `cerulean doctor`.
const (
	ExitOK        = 0 // every step passed
	ExitFailed    = 1 // a step failed
	ExitUncertain = 2 // a step could not be checked
)

// ExitCode is 1 when a step failed, else 2 when one could not be checked, else 0.
func (r Report) ExitCode() int {
	code := ExitOK
	for _, s := range r.Steps {
		switch s.Status {
		case Fail:
			return ExitFailed
		case Error:
			code = ExitUncertain
		}
	}
	return code
}

// FirstFailure is the first failing step, or nil.
func (r Report) FirstFailure() *Step {
	for i := range r.Steps {
		if r.Steps[i].Status == Fail {
			return &r.Steps[i]
		}
	}
	return nil
}

// Step returns the named step, or nil.
func (r Report) Step(name string) *Step {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i]
		}
	}
	return nil
}

// Write prints the report for a terminal: one line per step, the fix indented below a failure.
func (r Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "workload identity of %s\n", r.Subject)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "[%s] %-20s %s\n", s.Status, s.Name, s.Detail)
		if s.Fix != "" && (s.Status == Fail || s.Status == Error) {
			for line := range strings.SplitSeq(s.Fix, "\n") {
				fmt.Fprintf(&b, "       %-20s %s\n", "", line)
			}
		}
	}
	switch r.ExitCode() {
	case ExitOK:
		b.WriteString("result: the pod can get a token\n")
	case ExitFailed:
		fmt.Fprintf(&b, "result: step %q fails; fix it and run again\n", r.FirstFailure().Name)
	default:
		b.WriteString("result: some steps could not be checked\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
