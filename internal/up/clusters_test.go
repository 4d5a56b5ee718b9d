package up_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/up"
)

// A number of clusters out of 1..MaxClusters is refused before anything starts or is written,
// with an error naming the flag and the range.
func TestRunRefusesClusterCountsOutOfRange(t *testing.T) {
	for _, n := range []int{0, -1, up.MaxClusters + 1, 1000} {
		dir := filepath.Join(t.TempDir(), "data")
		var out strings.Builder
		err := up.Run(t.Context(), up.Options{DataDir: dir, Clusters: n, Out: &out})
		if err == nil || !strings.Contains(err.Error(), "--clusters") || !strings.Contains(err.Error(), "1 to "+strconv.Itoa(up.MaxClusters)) {
			t.Errorf("%d clusters: err %v, want an error naming --clusters and the range", n, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%d clusters: the data directory was created (%v)", n, err)
		}
		if out.Len() != 0 {
			t.Errorf("%d clusters: progress written: %q", n, out.String())
		}
	}
}

func TestClusterNames(t *testing.T) {
	for i, want := range map[int]string{1: "cerulean-local", 2: "cerulean-local-2", 10: "cerulean-local-10"} {
		if got := up.ClusterName(i); got != want {
			t.Errorf("ClusterName(%d) = %q, want %q", i, got, want)
		}
	}
}
