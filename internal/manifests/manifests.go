// Package manifests reads multi-document YAML manifests and applies them server-side: the one
// way the manager installs its CRDs, the node installs the Secrets Store CSI driver's released
// manifests, and the chart tests and the bench read and install objects.
package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Decode splits a multi-document YAML (or JSON) manifest into objects, skipping empty documents.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", len(objs)+1, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ReadFile decodes the manifest file at path.
func ReadFile(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path) //nolint:gosec // a manifest the caller names
	if err != nil {
		return nil, err
	}
	objs, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return objs, nil
}

// Apply applies each object server-side as fieldOwner, taking over conflicting fields (the
// installer owns these objects, as kubectl apply --server-side --force-conflicts would).
func Apply(ctx context.Context, c client.Client, fieldOwner string, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// WaitEstablished waits up to timeout for every CustomResourceDefinition among objs to be
// Established, so that objects of their kinds can be created next.
func WaitEstablished(ctx context.Context, c client.Client, timeout time.Duration, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		name := u.GetName()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
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
			return fmt.Errorf("wait for CRD %s to be established: %w", name, err)
		}
	}
	return nil
}
