package devenv

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Progress lines of planes started at once reach the shared writer whole, each with its plane's
// name, even when a line comes in pieces.
func TestPrefixedProgressKeepsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	shared := &lockedWriter{w: &buf}
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c"} {
		wg.Go(func() {
			w := &prefixWriter{w: shared, prefix: name + ": "}
			for i := range 200 {
				fmt.Fprintf(w, "step %d ", i)
				fmt.Fprintf(w, "of %s\n", name)
			}
			fmt.Fprint(w, "no newline yet")
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 600 {
		t.Fatalf("%d lines, want 600", len(lines))
	}
	for _, l := range lines {
		name, rest, ok := strings.Cut(l, ": ")
		if !ok || !strings.HasPrefix(rest, "step ") || !strings.HasSuffix(rest, " of "+name) {
			t.Fatalf("line %q is not one whole line of its plane", l)
		}
	}
}
