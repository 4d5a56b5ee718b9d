package config_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/controller/armresource"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// Every Azure object of the app sample is of a kind the manager reconciles, at a version its
// CRD serves, and every owner it names is in the sample.
func TestAppSampleKindsAreServed(t *testing.T) {
	reconciled := map[string]bool{"dbforpostgresql.azure.com/User": true}
	for _, k := range armresource.Kinds() {
		reconciled[k.GVK.GroupKind().String()] = true
	}
	served := servedVersions(t)
	objs := appSample(t)
	names := map[string]bool{}
	for _, u := range objs {
		names[u.GetName()] = true
	}
	for _, u := range objs {
		if !strings.HasSuffix(u.GroupVersionKind().Group, ".azure.com") {
			continue
		}
		gvk := u.GroupVersionKind()
		if !reconciled[gvk.GroupKind().String()] || !served[gvk.String()] {
			t.Errorf("%s %s: %s is not served", u.GetKind(), u.GetName(), u.GetAPIVersion())
		}
		if owner, ok, _ := unstructured.NestedString(u.Object, "spec", "owner", "name"); ok && !names[owner] {
			t.Errorf("%s %s: owner %s is not in the sample", u.GetKind(), u.GetName(), owner)
		}
	}
}

// servedVersions holds every group, version and kind the generated CRDs serve.
func servedVersions(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob("crd/bases/*.yaml")
	served := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
				served[gvk.String()] = true
			}
		}
	}
	if len(served) == 0 {
		t.Fatal("no CRD under crd/bases")
	}
	return served
}

// appSample is every object of the app sample, in file order.
func appSample(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, _ := filepath.Glob("samples/app/*.yaml")
	if len(files) == 0 {
		t.Fatal("no app sample")
	}
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
			if len(u.Object) != 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs
}

// The Redis URL the sample's expression writes carries any access key whole: keys are base64, and
// an unescaped "/" ended the URL's authority, so go-redis refused about every other key.
func TestAppSampleRedisURLCarriesAnyKey(t *testing.T) {
	var cache *unstructured.Unstructured
	for _, u := range appSample(t) {
		if u.GetKind() == "Redis" {
			cache = u
		}
	}
	if cache == nil {
		t.Fatal("no Redis in the app sample")
	}
	exprs, _, _ := unstructured.NestedSlice(cache.Object, "spec", "operatorSpec", "secretExpressions")
	var url string
	for _, e := range exprs {
		if m := e.(map[string]any); m["key"] == "url" {
			url = m["value"].(string)
		}
	}
	if url == "" {
		t.Fatal("the Redis has no secret expression for url")
	}
	obj := cache.DeepCopy().Object
	obj["status"] = map[string]any{"hostName": "shop-cache.redis.cache.windows.net", "sslPort": int64(6380)}
	for _, key := range []string{"ab/cd+ef/gh==", "+/+/", "plainKEY0123456789="} {
		got, err := exports.EvaluateWith(obj, map[string]string{"primaryKey": key},
			[]exports.Expression{{Destination: exports.Destination{Kind: exports.KindSecret, Name: "shop-redis", Key: "url"}, Expr: url}})
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		opts, err := redis.ParseURL(got[0].Value)
		if err != nil {
			t.Fatalf("key %q: go-redis refuses the URL: %v", key, err)
		}
		if opts.Password != key || opts.Addr != "shop-cache.redis.cache.windows.net:6380" || opts.TLSConfig == nil {
			t.Errorf("key %q: go-redis reads password %q, address %s, TLS %v", key, opts.Password, opts.Addr, opts.TLSConfig != nil)
		}
	}
}
