// Package lifecycle holds what every controller asks before it deletes anything in Azure:
// whether the object is going because its CRD is. Removing a CRD (an uninstall) must never
// delete data in Azure, so objects deleted that way are detached.
package lifecycle

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// CRDDeleting reports whether gvk's CRD is being deleted (or is gone). reader should read
// without a cache: the CRD is marked deleted just before its objects are.
func CRDDeleting(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, fmt.Errorf("map %s: %w", gvk.Kind, err)
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(crdGVK)
	if err := reader.Get(ctx, client.ObjectKey{Name: mapping.Resource.Resource + "." + gvk.Group}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read CRD of %s: %w", gvk.Kind, err)
	}
	return !crd.GetDeletionTimestamp().IsZero(), nil
}
