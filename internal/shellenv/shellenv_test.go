package shellenv

import (
	"os/exec"
	"testing"
)

// What Quote produces, a shell reads back as the original value.
func TestQuoteRoundTripsThroughTheShell(t *testing.T) {
	for _, v := range []string{"/plain/path", "with space", "it's", `$HOME and "quotes"`, "", "a\nb"} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(v)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != v {
			t.Errorf("Quote(%q) read back as %q", v, out)
		}
	}
}
