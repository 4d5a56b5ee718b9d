package armresource

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A child waiting for its owner is woken when the owner is created and when it becomes Ready
// with its id, not by the owner's other status writes.
func TestOwnerEventsThatWakeChildren(t *testing.T) {
	owner := func(ready, id string) *unstructured.Unstructured {
		status := map[string]any{}
		if ready != "" {
			status["conditions"] = []any{map[string]any{"type": "Ready", "status": ready}}
		}
		if id != "" {
			status["id"] = id
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": status}}
	}
	const id = "/subscriptions/s/resourceGroups/rg"
	p := readyChanged()
	if !p.Create(event.CreateEvent{Object: owner("", "")}) {
		t.Error("an owner's creation does not wake its children")
	}
	for _, tc := range []struct {
		name     string
		old, new *unstructured.Unstructured
		wake     bool
	}{
		{"became Ready", owner("False", id), owner("True", id), true},
		{"became Ready with its id", owner("False", ""), owner("True", id), true},
		{"Ready with another id", owner("True", id), owner("True", id+"2"), true},
		{"first condition, not Ready", owner("", ""), owner("False", ""), false},
		{"got its id, not Ready", owner("False", ""), owner("False", id), false},
		{"stayed Ready", owner("True", id), owner("True", id), false},
		{"no longer Ready", owner("True", id), owner("False", id), false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.wake {
			t.Errorf("%s: wakes children %v, want %v", tc.name, got, tc.wake)
		}
	}
	if p.Delete(event.DeleteEvent{Object: owner("True", id)}) {
		t.Error("an owner's deletion wakes its children")
	}
}
