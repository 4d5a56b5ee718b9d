package config_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cerulean/cerulean/internal/controller/armresource"
)

// Every Azure object of the app sample is of a kind the manager reconciles, at a version it
// serves, and every owner it names is in the sample.
func TestAppSampleKindsAreServed(t *testing.T) {
	served := map[string]bool{"dbforpostgresql.azure.com/v1/User": true}
	for _, k := range armresource.Kinds() {
		served[k.GVK.GroupVersion().String()+"/"+k.GVK.Kind] = true
	}
	files, _ := filepath.Glob("samples/app/*.yaml")
	if len(files) == 0 {
		t.Fatal("no app sample")
	}
	names := map[string]bool{}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			objs = append(objs, u)
			names[u.GetName()] = true
		}
	}
	for _, u := range objs {
		if !strings.HasSuffix(u.GroupVersionKind().Group, ".azure.com") {
			continue
		}
		if !served[u.GetAPIVersion()+"/"+u.GetKind()] {
			t.Errorf("%s %s: %s is not served", u.GetKind(), u.GetName(), u.GetAPIVersion())
		}
		if owner, ok, _ := unstructured.NestedString(u.Object, "spec", "owner", "name"); ok && !names[owner] {
			t.Errorf("%s %s: owner %s is not in the sample", u.GetKind(), u.GetName(), owner)
		}
	}
}
