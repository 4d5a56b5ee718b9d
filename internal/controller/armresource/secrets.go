package armresource

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

// indexSecrets holds the Secrets an object's secret inputs read.
const indexSecrets = "cerulean.secrets"

// Secret inputs are Azure Service Operator's SecretReference fields ({name, key}): the value
// of that key of that Secret, in the object's own namespace and never another, is what ARM
// gets. The value lives only in the request body: never in status, Events, logs or errors
// (which name the Secret and key, not the value). The body's hash covers it, so a changed
// Secret is a changed body and is applied (the Secret is watched).

// secretInputRefs are the {name, key} references of a spec's secret inputs, by path.
func secretInputRefs(spec map[string]any, paths []string) map[string][2]string {
	out := map[string][2]string{}
	for _, p := range paths {
		ref, ok, _ := unstructured.NestedMap(spec, strings.Split(p, ".")...)
		if !ok {
			continue
		}
		name, _ := ref["name"].(string)
		key, _ := ref["key"].(string)
		out[p] = [2]string{name, key}
	}
	return out
}

// bodyPath is where a spec path lands in the ARM body: under properties for a flattened kind.
func bodyPath(path string, flatten bool) []string {
	parts := strings.Split(path, ".")
	if flatten && !topLevelKeys[parts[0]] {
		return append([]string{"properties"}, parts...)
	}
	return parts
}

// resolveSecretInputs puts each secret input's value in place of its reference in body.
func (r *Reconciler) resolveSecretInputs(ctx context.Context, obj *unstructured.Unstructured, body map[string]any) error {
	k := r.opts.Kind
	if len(k.SecretInputs) == 0 {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	refs := secretInputRefs(spec, k.SecretInputs)
	paths := make([]string, 0, len(refs))
	for p := range refs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		ref := refs[p]
		val, err := r.secretValue(ctx, obj.GetNamespace(), ref[0], ref[1])
		if err != nil {
			return fmt.Errorf("resolve %s: %w", p, err)
		}
		if err := unstructured.SetNestedField(body, val, bodyPath(p, k.Flatten)...); err != nil {
			return fmt.Errorf("%w: %s: %w", errInvalidSpec, p, err)
		}
	}
	return nil
}

// secretValue reads key of Secret name in namespace. Errors name the Secret and key only.
func (r *Reconciler) secretValue(ctx context.Context, namespace, name, key string) (string, error) {
	s := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("%w: Secret %s/%s does not exist", errSecret, namespace, name)
		}
		return "", fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	v, ok := s.Data[key]
	if !ok {
		return "", fmt.Errorf("%w: Secret %s/%s has no key %s", errSecret, namespace, name, key)
	}
	return string(v), nil
}

// watchSecrets runs an object again when a Secret its secret inputs read changes.
func (r *Reconciler) watchSecrets(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) error {
	k := r.opts.Kind
	if len(k.SecretInputs) == 0 {
		return nil
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newObject(), indexSecrets, func(o client.Object) []string {
		spec, _, _ := unstructured.NestedMap(o.(*unstructured.Unstructured).Object, "spec")
		var names []string
		for _, ref := range secretInputRefs(spec, k.SecretInputs) {
			names = append(names, ref[0])
		}
		sort.Strings(names)
		return names
	}); err != nil {
		return fmt.Errorf("index Secrets of %s: %w", k.GVK.Kind, err)
	}
	b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.listBy(indexSecrets, func(o client.Object) string { return o.GetName() })))
	return nil
}

// ownInKubernetes makes the object owned by its owner object, as Azure Service Operator does,
// so that deleting a server (or resource group) deletes the objects of what Azure deletes
// with it. The owner is Ready here (the ARM id was resolved from it).
func (r *Reconciler) ownInKubernetes(ctx context.Context, obj *unstructured.Unstructured) error {
	k := r.opts.Kind
	if !k.OwnedInKubernetes || len(k.OwnerKinds) == 0 {
		return nil
	}
	name, _, _ := unstructured.NestedString(obj.Object, "spec", "owner", "name")
	if name == "" {
		return nil // an owner by ARM id has no object
	}
	gvk, ok := servedGVK(k.OwnerKinds[0].Group, k.OwnerKinds[0].Kind)
	if !ok {
		return nil
	}
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, owner); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return nil
		}
	}
	orig := obj.DeepCopy()
	obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID(),
	}))
	status := obj.Object["status"]
	if err := r.Patch(ctx, obj, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("set owner reference: %w", err)
	}
	if status != nil {
		obj.Object["status"] = status
	}
	return nil
}

// scrubSecretInputs removes secret inputs from a status, should ARM ever echo one.
func scrubSecretInputs(status map[string]any, paths []string) {
	for _, p := range paths {
		unstructured.RemoveNestedField(status, strings.Split(p, ".")...)
	}
}

// withoutPaths is a copy of body without the dotted paths.
func withoutPaths(body map[string]any, paths []string) map[string]any {
	if len(paths) == 0 {
		return body
	}
	out := deepCopy(body).(map[string]any)
	for _, p := range paths {
		unstructured.RemoveNestedField(out, strings.Split(p, ".")...)
	}
	return out
}
