package rollout

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyChart copies the test chart to a new directory with every file's time set to mtime.
func copyChart(t *testing.T, mtime time.Time) string {
	t.Helper()
	src := filepath.Join("examplechart", "app")
	dst := filepath.Join(t.TempDir(), "app")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o750)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, b, 0o600); err != nil {
			return err
		}
		return os.Chtimes(out, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func digestOf(t *testing.T, dir string, values map[string]any) string {
	t.Helper()
	spec, err := loadChart(App{Chart: dir, Values: values, ClientIDValue: DefaultClientIDValue})
	if err != nil {
		t.Fatal(err)
	}
	d, err := spec.digest(spec.valuesFor("client-1"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The release digest follows the chart's content and the values, not file times: a fresh
// checkout of the same chart in CI must not upgrade every release.
func TestDigestFollowsContentNotTimes(t *testing.T) {
	a := copyChart(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	b := copyChart(t, time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	if digestOf(t, a, nil) != digestOf(t, b, nil) {
		t.Error("the same chart at other file times has another digest")
	}
	if digestOf(t, a, nil) == digestOf(t, a, map[string]any{"replicas": 2}) {
		t.Error("other values, same digest")
	}
	if err := os.WriteFile(filepath.Join(b, "templates", "extra.yaml"), []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if digestOf(t, a, nil) == digestOf(t, b, nil) {
		t.Error("a chart with another template has the same digest")
	}
}

func TestValuesForSetsTheClientIDAtItsPath(t *testing.T) {
	spec := &chartSpec{values: map[string]any{"a": map[string]any{"keep": 1}}, valPath: []string{"a", "b", "clientId"}}
	got := spec.valuesFor("cid")
	if got["a"].(map[string]any)["b"].(map[string]any)["clientId"] != "cid" || got["a"].(map[string]any)["keep"] != 1 {
		t.Errorf("values %v", got)
	}
	if _, leaked := spec.values["a"].(map[string]any)["b"]; leaked {
		t.Error("valuesFor changed the shared values")
	}
}
