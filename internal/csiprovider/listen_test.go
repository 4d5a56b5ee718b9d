package csiprovider_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/csiprovider"
)

// TestListenNamesATooLongSocketPath: a socket path longer than a unix socket allows is refused
// with an error that says so (seen as a bare "bind: invalid argument" under a long data dir),
// and nothing is created for it.
func TestListenNamesATooLongSocketPath(t *testing.T) {
	p, err := csiprovider.New(csiprovider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	_, err = csiprovider.Listen(p, filepath.Join(dir, "azure.sock"))
	if err == nil || !strings.Contains(err.Error(), "more than a unix socket allows") {
		t.Fatalf("Listen on a %d-byte path: %v, want an error naming the limit", len(dir)+11, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the providers directory was created for a refused socket: %v", err)
	}
}
