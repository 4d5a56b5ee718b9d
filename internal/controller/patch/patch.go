// Package patch is the one way every controller writes the objects it reconciles: snapshot the
// object when a pass starts, change it in memory, and write once at the end (cluster-api's
// patch helper): one merge patch of metadata (labels, annotations, finalizers) and one of
// status, each sent only when it changed. Merge patches carry no resourceVersion, so a pass
// never fails on a conflict with a write it did not make; the controller owns the fields it
// writes (for status, the whole conditions list). WithOptimisticLock is for what a pass must not
// write from a stale read: a field that records what an earlier pass did.
package patch

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helper writes what changed in one object since New (or the last Patch).
type Helper struct {
	c      client.Client
	before map[string]any
	// inline is set for kinds without a status subresource: status goes with metadata.
	inline bool
	// locked patches carry the snapshot's resourceVersion: a newer object is a Conflict.
	locked bool
}

// Option configures a Helper.
type Option func(*Helper)

// WithoutStatusSubresource is for kinds whose CRD has no status subresource (aad-pod-identity's):
// metadata and status go in one patch of the object.
func WithoutStatusSubresource() Option { return func(h *Helper) { h.inline = true } }

// WithOptimisticLock makes Patch fail with a Conflict when the object changed on the server
// since it was read (apierrors.IsConflict): the pass read a cache that was behind, and the next
// one, reading the newer object, writes instead.
func WithOptimisticLock() Option { return func(h *Helper) { h.locked = true } }

// New snapshots obj.
func New(c client.Client, obj client.Object, opts ...Option) (*Helper, error) {
	before, err := toMap(obj)
	if err != nil {
		return nil, err
	}
	h := &Helper{c: c, before: before}
	for _, o := range opts {
		o(h)
	}
	return h, nil
}

// metaFields are the metadata a controller writes.
var metaFields = []string{"labels", "annotations", "finalizers"}

// Patch writes obj's changes since the snapshot: metadata first (a finalizer or a resume token
// must not be lost to a failed status write), then status. obj keeps its in-memory content;
// only its resourceVersion follows the server's.
func (h *Helper) Patch(ctx context.Context, obj client.Object) error {
	after, err := toMap(obj)
	if err != nil {
		return err
	}
	from := copyMap(after)
	fromMeta, _ := from["metadata"].(map[string]any)
	beforeMeta, _ := h.before["metadata"].(map[string]any)
	for _, f := range metaFields {
		if v, ok := beforeMeta[f]; ok {
			fromMeta[f] = v
		} else {
			delete(fromMeta, f)
		}
	}
	if h.inline {
		setOrDelete(from, "status", h.before)
	}
	if err := h.send(ctx, obj, from, after, false); err != nil {
		return fmt.Errorf("patch metadata: %w", err)
	}
	if !h.inline {
		// The status patch follows the metadata one: a locked patch must name its new version.
		if m, ok := after["metadata"].(map[string]any); ok {
			m["resourceVersion"] = obj.GetResourceVersion()
		}
		from = copyMap(after)
		setOrDelete(from, "status", h.before)
		if err := h.send(ctx, obj, from, after, true); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	h.before = after
	return nil
}

// send patches obj with the merge patch from→to, when there is one.
func (h *Helper) send(ctx context.Context, obj client.Object, from, to map[string]any, status bool) error {
	if equality.Semantic.DeepEqual(from, to) {
		return nil
	}
	var opts []client.MergeFromOption
	if h.locked {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	data, err := client.MergeFromWithOptions(&unstructured.Unstructured{Object: from}, opts...).Data(&unstructured.Unstructured{Object: to})
	if err != nil {
		return err
	}
	scratch := obj.DeepCopyObject().(client.Object)
	p := client.RawPatch(types.MergePatchType, data)
	if status {
		err = h.c.Status().Patch(ctx, scratch, p)
	} else {
		err = h.c.Patch(ctx, scratch, p)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(scratch.GetResourceVersion())
	return nil
}

// Changed reports whether obj differs from the snapshot in what Patch writes.
func (h *Helper) Changed(obj client.Object) bool {
	after, err := toMap(obj)
	if err != nil {
		return true
	}
	am, _ := after["metadata"].(map[string]any)
	bm, _ := h.before["metadata"].(map[string]any)
	for _, f := range metaFields {
		if !equality.Semantic.DeepEqual(am[f], bm[f]) {
			return true
		}
	}
	return !equality.Semantic.DeepEqual(after["status"], h.before["status"])
}

// toMap is obj as JSON values (numbers as float64 on both sides, so equal values compare
// equal whatever Go type built them).
func toMap(obj client.Object) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %T: %w", obj, err)
	}
	if m["metadata"] == nil {
		m["metadata"] = map[string]any{}
	}
	return m, nil
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if k == "metadata" {
			meta := map[string]any{}
			for mk, mv := range v.(map[string]any) {
				meta[mk] = mv
			}
			v = meta
		}
		out[k] = v
	}
	return out
}

func setOrDelete(m map[string]any, key string, src map[string]any) {
	if v, ok := src[key]; ok {
		m[key] = v
	} else {
		delete(m, key)
	}
}
