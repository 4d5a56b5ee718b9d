package manager

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
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
// them), Secrets and ConfigMaps without the data of those the manager does not own, and Pods
// cut to what pod identity's assignment controller reads.
func cacheOptions(namespaces []string) cache.Options {
	o := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    {Transform: dropUnownedData},
			&corev1.ConfigMap{}: {Transform: dropUnownedData},
			&corev1.Pod{}:       {Transform: podForAssignment},
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

// keepsData says whether the cache holds the data of o, a Secret or ConfigMap of kind: what the
// manager writes (an export) or reads at every reconcile (a credential).
func keepsData(kind string, o client.Object) bool {
	if _, ok := o.GetAnnotations()[exports.AnnotationKeyOwners]; ok {
		return true
	}
	return kind == "Secret" && (o.GetName() == credentials.NamespaceSecretName || controllerutil.ContainsFinalizer(o, credentials.FinalizerInUse))
}

// dropUnownedData is the cache's transform of Secrets and ConfigMaps (typed, or read as
// unstructured, which nothing in the manager does but its cache would hold the same way).
func dropUnownedData(in any) (any, error) {
	var kind string
	var drop func()
	switch o := in.(type) {
	case *corev1.Secret:
		kind, drop = "Secret", func() { o.Data, o.StringData = nil, nil }
	case *corev1.ConfigMap:
		kind, drop = "ConfigMap", func() { o.Data, o.BinaryData = nil, nil }
	case *unstructured.Unstructured:
		kind, drop = o.GetKind(), func() {
			for _, f := range []string{"data", "stringData", "binaryData"} {
				unstructured.RemoveNestedField(o.Object, f)
			}
		}
	default:
		return in, nil
	}
	o := in.(client.Object)
	o.SetManagedFields(nil)
	if keepsData(kind, o) {
		return in, nil
	}
	drop()
	a := o.GetAnnotations()
	delete(a, lastApplied)
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationDataNotCached] = "true"
	o.SetAnnotations(a)
	return in, nil
}

// podForAssignment keeps of a Pod what the assignment controller reads (its metadata, node and
// phase): every Pod of the cluster is watched, and a whole Pod is kilobytes of spec and status.
func podForAssignment(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	meta := p.ObjectMeta
	meta.ManagedFields = nil
	if _, ok := meta.Annotations[lastApplied]; ok {
		meta.Annotations = maps.Clone(meta.Annotations)
		delete(meta.Annotations, lastApplied)
	}
	return &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: meta,
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}, Status: corev1.PodStatus{Phase: p.Status.Phase}}, nil
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
