package helmchart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// valuesReference is the heading of docs/install.md's section that lists every chart value.
const valuesReference = "## Values reference"

// Every value of values.yaml (each leaf; a resources block counts as one value) has a row in
// docs/install.md's values reference, which names it in backticks at the start of the row, and
// the reference names no value the chart lacks.
func TestValuesReferenceIsComplete(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "charts", "cerulean", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	var want []string
	leaves("", values, &want)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+valuesReference+"\n")
	if !ok {
		t.Fatalf("docs/install.md has no %q section", valuesReference)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var documented []string
	for line := range strings.SplitSeq(section, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if i := strings.Index(name, "`"); i > 0 {
				documented = append(documented, name[:i])
			}
		}
	}
	for _, v := range want {
		if !slices.Contains(documented, v) {
			t.Errorf("value %s of values.yaml is missing from docs/install.md's %s", v, valuesReference)
		}
	}
	for _, v := range documented {
		if !slices.Contains(want, v) {
			t.Errorf("docs/install.md's %s names %s, which values.yaml lacks", valuesReference, v)
		}
	}
}

// leaves appends the dotted path of every leaf of m: scalars, lists, empty maps and resources.
func leaves(prefix string, m map[string]any, out *[]string) {
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && k != "resources" {
			leaves(p, sub, out)
			continue
		}
		*out = append(*out, p)
	}
}
