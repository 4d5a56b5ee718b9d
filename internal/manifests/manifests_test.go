package manifests_test

import (
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/manifests"
)

// Documents split on ---, empty ones are skipped, and a bad one is named by its position.
func TestDecode(t *testing.T) {
	objs, err := manifests.Decode([]byte("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# only a comment\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "ConfigMap" || objs[1].GetName() != "b" {
		t.Fatalf("decoded %d objects: %v", len(objs), objs)
	}
	_, err = manifests.Decode([]byte("apiVersion: v1\nkind: ConfigMap\n---\nkind: [unclosed\n"))
	if err == nil || !strings.Contains(err.Error(), "document 2") {
		t.Fatalf("a bad second document: %v, want it named", err)
	}
}
