package manager

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/exports"
)

// The manager watches every Secret and ConfigMap of its namespaces (a secret input's change, a
// deleted export, a held credential must run the objects that use them), but holds the data of
// only those it writes or reads on every reconcile: its exports, aso-credential and the
// credential Secrets it holds. Of the others (a cluster's Helm releases, token Secrets,
// kube-root-ca.crt) the cache keeps the metadata, so its memory grows with the manager's
// objects rather than with the cluster; the few it reads (a secret input, a ConfigMap input)
// are read from the API server when used.

// AnnotationDataNotCached marks a cached Secret or ConfigMap whose data was dropped; the
// manager's client reads such an object from the API server instead.
const AnnotationDataNotCached = "cerulean.dev/data-not-cached"

// lastApplied is kubectl's copy of an applied object: for a Secret, its data again.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// cacheOptions are the cache's: the target namespaces, managedFields never held (nothing reads
// them), and Secrets and ConfigMaps without the data of those the manager does not own.
func cacheOptions(namespaces []string) cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Transform: dropUnownedData},
			&corev1.ConfigMap{}: {Transform: dropUnownedData},
		},
	}
	if len(namespaces) > 0 {
		o.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range namespaces {
			o.DefaultNamespaces[n] = cache.Config{}
		}
	}
	return o
}

// keepsData says whether the cache holds o's data: what the manager writes (an export) or reads
// at every reconcile (a credential).
func keepsData(o metav1.Object) bool {
	if _, ok := o.GetAnnotations()[exports.AnnotationKeyOwners]; ok {
		return true
	}
	if _, secret := o.(*corev1.Secret); secret {
		return o.GetName() == credentials.NamespaceSecretName || controllerutil.ContainsFinalizer(o.(client.Object), credentials.FinalizerInUse)
	}
	return false
}

// dropUnownedData is the cache's transform of Secrets and ConfigMaps.
func dropUnownedData(in any) (any, error) {
	if m, ok := in.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	var meta *metav1.ObjectMeta
	switch o := in.(type) {
	case *corev1.Secret:
		if keepsData(o) {
			return o, nil
		}
		o.Data, o.StringData = nil, nil
		meta = &o.ObjectMeta
	case *corev1.ConfigMap:
		if keepsData(o) {
			return o, nil
		}
		o.Data, o.BinaryData = nil, nil
		meta = &o.ObjectMeta
	case *unstructured.Unstructured:
		// The same objects read as unstructured (nothing in the manager does, but its cache
		// would hold them): the same rule.
		if _, ok := o.GetAnnotations()[exports.AnnotationKeyOwners]; ok {
			return o, nil
		}
		if o.GetKind() == "Secret" && (o.GetName() == credentials.NamespaceSecretName || controllerutil.ContainsFinalizer(o, credentials.FinalizerInUse)) {
			return o, nil
		}
		for _, f := range []string{"data", "stringData", "binaryData"} {
			unstructured.RemoveNestedField(o.Object, f)
		}
		a := o.GetAnnotations()
		delete(a, lastApplied)
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationDataNotCached] = "true"
		o.SetAnnotations(a)
		return o, nil
	default:
		return in, nil
	}
	delete(meta.Annotations, lastApplied)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationDataNotCached] = "true"
	return in, nil
}

// dataClient is the manager's client: cached reads, except that a Secret or ConfigMap whose
// data the cache dropped is read again from the API server.
type dataClient struct {
	client.Client
	direct client.Reader
}

// newClient is the manager's NewClient: controller-runtime's client reading from the cache,
// wrapped in dataClient.
func newClient(config *rest.Config, options client.Options) (client.Client, error) {
	c, err := client.New(config, options)
	if err != nil {
		return nil, err
	}
	direct, err := client.New(config, client.Options{Scheme: options.Scheme, Mapper: options.Mapper, HTTPClient: options.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("create uncached client: %w", err)
	}
	return &dataClient{Client: c, direct: direct}, nil
}

func (c *dataClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if _, dropped := obj.GetAnnotations()[AnnotationDataNotCached]; !dropped {
		return nil
	}
	// Decoding merges into maps already there: start from an empty object.
	switch o := obj.(type) {
	case *corev1.Secret:
		*o = corev1.Secret{}
	case *corev1.ConfigMap:
		*o = corev1.ConfigMap{}
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		o.Object = nil
		o.SetGroupVersionKind(gvk)
	default:
		return nil
	}
	if err := c.direct.Get(ctx, key, obj, opts...); err != nil {
		return err //nolint:wrapcheck // the caller names the object
	}
	return nil
}
