// Package patch is the one way every controller writes the objects it reconciles: snapshot the
// object when a pass starts, change it in memory, and write once at the end (cluster-api's
// patch helper): one merge patch of metadata (labels, annotations, finalizers) and one of
// status, each sent only when it changed. Merge patches carry no resourceVersion, so a pass
// never fails on a conflict with a write it did not make; the controller owns the fields it
// writes (for status, the whole conditions list, unless WithOwnedConditions names the ones it
// owns). WithOptimisticLock is for what a pass must not write from a stale read: a field that
// records what an earlier pass did.
package patch

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// owned are the condition types (status.conditions) this controller writes.
	owned map[string]bool
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

// WithOwnedConditions names the condition types in status.conditions that this controller
// writes (cluster-api's WithOwnedConditions). The status patch then keeps every other condition
// the server holds, whoever wrote it, and sets the owned ones to the controller's: it is sent
// with the object's resourceVersion, and on a Conflict the object is read again and the lists
// merged (a few times at most). With WithOptimisticLock too, a Conflict is returned instead:
// the pass read a stale object and the next one writes. Not for kinds without a status
// subresource.
func WithOwnedConditions(types ...string) Option {
	return func(h *Helper) {
		h.owned = map[string]bool{}
		for _, t := range types {
			h.owned[t] = true
		}
	}
}

// ownedRetries bounds the re-reads after a Conflict on an owned-conditions status patch.
const ownedRetries = 5

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
	// server is the object as the server last showed it: the snapshot, or the metadata
	// patch's answer (which carries conditions written since the snapshot).
	server, err := h.send(ctx, obj, from, after, false, h.locked)
	if err != nil {
		return fmt.Errorf("patch metadata: %w", err)
	}
	if !h.inline {
		// The status patch follows the metadata one: a locked patch must name its new version.
		if m, ok := after["metadata"].(map[string]any); ok {
			m["resourceVersion"] = obj.GetResourceVersion()
		}
		if err := h.patchStatus(ctx, obj, after, server); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	h.before = after
	return nil
}

// patchStatus writes after's status. With owned conditions, the list sent is the server's with
// the owned types replaced by after's; a Conflict reads the object again and merges anew.
func (h *Helper) patchStatus(ctx context.Context, obj client.Object, after, server map[string]any) error {
	if server == nil {
		server = h.before
	}
	for attempt := 0; ; attempt++ {
		from, to := copyMap(after), after
		setOrDelete(from, "status", h.before)
		if h.owned != nil {
			to = copyMap(after)
			from["status"] = withConditions(from["status"], conditions(server))
			to["status"] = withConditions(to["status"], mergeConditions(conditions(server), conditions(after), h.owned))
		}
		_, err := h.send(ctx, obj, from, to, true, h.locked || h.owned != nil)
		if err == nil && h.owned != nil {
			after["status"] = to["status"] // the next Patch starts from what the server holds
		}
		if h.owned == nil || h.locked || !apierrors.IsConflict(err) || attempt == ownedRetries {
			return err
		}
		latest := obj.DeepCopyObject().(client.Object)
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(obj), latest); err != nil {
			return err
		}
		if server, err = toMap(latest); err != nil {
			return err
		}
		obj.SetResourceVersion(latest.GetResourceVersion())
		after["metadata"].(map[string]any)["resourceVersion"] = latest.GetResourceVersion()
	}
}

// conditions is status.conditions of an object's JSON form.
func conditions(m map[string]any) []any {
	st, _ := m["status"].(map[string]any)
	c, _ := st["conditions"].([]any)
	return c
}

// withConditions is a copy of a status with conds as its conditions.
func withConditions(status any, conds []any) any {
	st, _ := status.(map[string]any)
	out := make(map[string]any, len(st)+1)
	for k, v := range st {
		out[k] = v
	}
	if conds == nil {
		delete(out, "conditions")
	} else {
		out["conditions"] = conds
	}
	return out
}

// mergeConditions is the server's conditions in their order with the owned types taken from
// ours (dropped when ours has none), then owned ones the server lacks.
func mergeConditions(server, ours []any, owned map[string]bool) []any {
	byType := map[string]any{}
	for _, c := range ours {
		if t := conditionType(c); owned[t] {
			byType[t] = c
		}
	}
	var out []any
	for _, c := range server {
		t := conditionType(c)
		if !owned[t] {
			out = append(out, c)
		} else if mine, ok := byType[t]; ok {
			out = append(out, mine)
			delete(byType, t)
		}
	}
	for _, c := range ours {
		if mine, ok := byType[conditionType(c)]; ok {
			out = append(out, mine)
			delete(byType, conditionType(c))
		}
	}
	return out
}

func conditionType(c any) string {
	m, _ := c.(map[string]any)
	t, _ := m["type"].(string)
	return t
}

// send patches obj with the merge patch from→to, when there is one, and returns the server's
// answer (nil when nothing was sent).
func (h *Helper) send(ctx context.Context, obj client.Object, from, to map[string]any, status, locked bool) (map[string]any, error) {
	if equality.Semantic.DeepEqual(from, to) {
		return nil, nil
	}
	var opts []client.MergeFromOption
	if locked {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	data, err := client.MergeFromWithOptions(&unstructured.Unstructured{Object: from}, opts...).Data(&unstructured.Unstructured{Object: to})
	if err != nil {
		return nil, err
	}
	scratch := obj.DeepCopyObject().(client.Object)
	p := client.RawPatch(types.MergePatchType, data)
	if status {
		err = h.c.Status().Patch(ctx, scratch, p)
	} else {
		err = h.c.Patch(ctx, scratch, p)
	}
	if err != nil {
		return nil, err
	}
	obj.SetResourceVersion(scratch.GetResourceVersion())
	return toMap(scratch)
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
