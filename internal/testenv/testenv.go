// Package testenv decides what a test does when this machine lacks something it needs. On a
// developer's machine the test skips and says how to get it; under CI=true it fails, because CI's
// machine is set up by the project's own scripts (make test), so a missing tool there is a bug
// in those scripts and a skip would hide it.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where nothing may be missing.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing stops the test for want of something the machine should have: a skip on a
// developer's machine, a failure in CI. The message should name what installs it.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: a missing tool is a failure, not a skip)", msg)
		return
	}
	t.Skip(msg)
}

// Tools stops the test (as Missing does) unless every named program is on PATH.
func Tools(t testing.TB, install string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			Missing(t, "%s is not installed; %s installs it", tool, install)
		}
	}
}

// Root stops the test (as Missing does) unless it runs as root; why says what needs root.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}
