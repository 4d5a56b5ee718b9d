package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/config"
)

// InstallCRDs applies the embedded CRDs (server-side, so a newer binary updates them) and
// waits until every one is established.
func InstallCRDs(ctx context.Context, rc *rest.Config) error {
	c, err := client.New(rc, client.Options{})
	if err != nil {
		return fmt.Errorf("connect to kube-apiserver: %w", err)
	}
	files, err := fs.Glob(config.CRDs, "crd/bases/*.yaml")
	if err != nil {
		return fmt.Errorf("list CRDs: %w", err)
	}
	var names []string
	for _, f := range files {
		b, err := config.CRDs.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decode %s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("cerulean"), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
			}
			names = append(names, u.GetName())
		}
	}
	for _, n := range names {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, nil //nolint:nilerr // not there yet
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, x := range conds {
				if m, ok := x.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("wait for CRD %s: %w", n, err)
		}
	}
	return nil
}
