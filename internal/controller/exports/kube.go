package exports

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// AnnotationKeyOwners is the annotation that, on an exported ConfigMap or Secret, records which resource (by UID) wrote
// each key: a JSON object from key to UID. A key it does not list is not the writer's to change.
const AnnotationKeyOwners = "cerulean.dev/exported-keys"

// ErrKeyConflict is returned when a destination key is already held by another resource, or by data the
// exporter did not write. Not retried until something changes.
var ErrKeyConflict = errors.New("export destination key is owned by another object")

// KubeWriter writes exported values into ConfigMaps and Secrets in the owner's namespace.
type KubeWriter struct {
	// Client reads (the manager's cache is fine: a stale read ends in a conflict and a retry)
	// and writes the objects; its scheme must know the owner's type.
	Client client.Client
}

// NewKubeWriter is a KubeWriter using c.
func NewKubeWriter(c client.Client) *KubeWriter { return &KubeWriter{Client: c} }

type objKey struct{ kind, name string }

// Write makes each destination object hold vals: created when missing, owned by owner (an owner
// reference: a controller reference when the object has no controller yet), keys merged with
// the ones others wrote, keys owner wrote before but no longer exports removed, and written
// only when something changed. A key held by another resource, or present without a record of
// who wrote it, is refused with ErrKeyConflict and nothing of that object is written. Errors
// never contain values.
func (w *KubeWriter) Write(ctx context.Context, owner client.Object, vals []Value) error {
	gvk, err := apiutil.GVKForObject(owner, w.Client.Scheme())
	if err != nil {
		return fmt.Errorf("find owner kind: %w", err)
	}
	ref := metav1.OwnerReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.GetName(), UID: owner.GetUID()}
	if ref.UID == "" {
		return fmt.Errorf("write exports of %s %s: the owner has no UID", gvk.Kind, owner.GetName())
	}
	grouped := map[objKey]map[string]string{}
	for _, v := range vals {
		if v.Kind != KindConfigMap && v.Kind != KindSecret {
			return fmt.Errorf("write exports: destination kind %q is neither %s nor %s", v.Kind, KindConfigMap, KindSecret)
		}
		k := objKey{v.Kind, v.Name}
		if grouped[k] == nil {
			grouped[k] = map[string]string{}
		}
		if _, dup := grouped[k][v.Key]; dup {
			return fmt.Errorf("%w: %s %s key %q is exported twice by %s %s", ErrKeyConflict, v.Kind, v.Name, v.Key, gvk.Kind, owner.GetName())
		}
		grouped[k][v.Key] = v.Value
	}
	keys := slices.SortedFunc(maps.Keys(grouped), func(a, b objKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	for _, k := range keys {
		if err := w.writeOne(ctx, owner, ref, k, grouped[k]); err != nil {
			return err
		}
	}
	return nil
}

func (w *KubeWriter) writeOne(ctx context.Context, owner client.Object, ref metav1.OwnerReference, k objKey, want map[string]string) error {
	ns := owner.GetNamespace()
	obj, data := newObject(k.kind)
	err := w.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: k.name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		obj, data = newObject(k.kind)
		obj.SetNamespace(ns)
		obj.SetName(k.name)
		owners := map[string]string{}
		for key, v := range want {
			data.set(key, v)
			owners[key] = string(ref.UID)
		}
		ref.Controller = ptr.To(true)
		obj.SetOwnerReferences([]metav1.OwnerReference{ref})
		setKeyOwners(obj, owners)
		if err := w.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s %s/%s: %w", k.kind, ns, k.name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get %s %s/%s: %w", k.kind, ns, k.name, err)
	}

	owners, err := keyOwners(obj)
	if err != nil {
		return fmt.Errorf("%w: %s %s/%s: %w", ErrKeyConflict, k.kind, ns, k.name, err)
	}
	uid := string(ref.UID)
	changed := false
	for _, key := range sortedKeys(want) {
		holder, recorded := owners[key]
		switch {
		case recorded && holder != uid:
			return fmt.Errorf("%w: %s %s/%s key %q is written by %s", ErrKeyConflict, k.kind, ns, k.name, key, describeOwner(obj, holder))
		case !recorded && data.has(key):
			return fmt.Errorf("%w: %s %s/%s key %q exists and was not written by an export", ErrKeyConflict, k.kind, ns, k.name, key)
		}
		if !recorded {
			owners[key] = uid
			changed = true
		}
		if cur, ok := data.get(key); !ok || cur != want[key] {
			data.set(key, want[key])
			changed = true
		}
	}
	// Keys this owner wrote before and no longer exports.
	for key, holder := range owners {
		if _, still := want[key]; holder == uid && !still {
			data.remove(key)
			delete(owners, key)
			changed = true
		}
	}
	if !hasOwnerRef(obj, ref.UID) {
		if !hasController(obj) {
			ref.Controller = ptr.To(true)
		}
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), ref))
		changed = true
	}
	if !changed {
		return nil
	}
	setKeyOwners(obj, owners)
	if err := w.Client.Update(ctx, obj); err != nil {
		return fmt.Errorf("update %s %s/%s: %w", k.kind, ns, k.name, err)
	}
	return nil
}

// dataMap hides the difference between a ConfigMap's strings and a Secret's bytes.
type dataMap struct {
	get    func(string) (string, bool)
	set    func(string, string)
	remove func(string)
}

func (d dataMap) has(k string) bool { _, ok := d.get(k); return ok }

func newObject(kind string) (client.Object, dataMap) {
	if kind == KindSecret {
		s := &corev1.Secret{Type: corev1.SecretTypeOpaque}
		return s, dataMap{
			get: func(k string) (string, bool) {
				if v, ok := s.Data[k]; ok {
					return string(v), true
				}
				v, ok := s.StringData[k]
				return v, ok
			},
			set: func(k, v string) {
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				s.Data[k] = []byte(v)
			},
			remove: func(k string) { delete(s.Data, k) },
		}
	}
	c := &corev1.ConfigMap{}
	return c, dataMap{
		get: func(k string) (string, bool) {
			if v, ok := c.Data[k]; ok {
				return v, true
			}
			_, ok := c.BinaryData[k]
			return "", ok
		},
		set: func(k, v string) {
			if c.Data == nil {
				c.Data = map[string]string{}
			}
			delete(c.BinaryData, k)
			c.Data[k] = v
		},
		remove: func(k string) { delete(c.Data, k) },
	}
}

func keyOwners(obj client.Object) (map[string]string, error) {
	owners := map[string]string{}
	raw, ok := obj.GetAnnotations()[AnnotationKeyOwners]
	if !ok {
		return owners, nil
	}
	if err := json.Unmarshal([]byte(raw), &owners); err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of strings", AnnotationKeyOwners)
	}
	return owners, nil
}

func setKeyOwners(obj client.Object, owners map[string]string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	b, _ := json.Marshal(owners) // a map of strings always marshals; keys sorted
	a[AnnotationKeyOwners] = string(b)
	obj.SetAnnotations(a)
}

func hasOwnerRef(obj client.Object, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func hasController(obj client.Object) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

// describeOwner names the resource holding uid from the object's owner references.
func describeOwner(obj client.Object, uid string) string {
	for _, r := range obj.GetOwnerReferences() {
		if string(r.UID) == uid {
			return r.Kind + " " + r.Name
		}
	}
	return "another resource (uid " + uid + ")"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
