package podidentity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/podidentity"
)

func match(id string) podidentity.Match {
	return podidentity.Match{
		Identity: &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "i", Namespace: "ns"}, Spec: aadv1.AzureIdentitySpec{ResourceID: id}},
		Binding:  &aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}},
	}
}

func assignedFor(id string, added bool) *aadv1.AzureAssignedIdentity {
	a := newAssigned(desired{pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, match: match(id)})
	a.Annotations = map[string]string{AddedAnnotation: map[bool]string{true: "true", false: "false"}[added]}
	return a
}

func TestPlanAssignments(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	const key = "ns/p-ns-b"
	cases := []struct {
		name                   string
		want                   map[string]desired
		existing               map[string]*aadv1.AzureAssignedIdentity
		creates, stale, needed int
		replaced, addedBefore  bool
	}{
		{"new pod", map[string]desired{key: {pod, match("/id/1")}}, nil, 1, 0, 1, false, false},
		{"assigned already", map[string]desired{key: {pod, match("/ID/1")}}, map[string]*aadv1.AzureAssignedIdentity{key: assignedFor("/id/1", true)}, 0, 0, 1, false, true},
		{"pod gone", nil, map[string]*aadv1.AzureAssignedIdentity{key: assignedFor("/id/1", true)}, 0, 1, 0, false, false},
		{"identity changed", map[string]desired{key: {pod, match("/id/2")}}, map[string]*aadv1.AzureAssignedIdentity{key: assignedFor("/id/1", true)}, 0, 1, 0, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl := planAssignments(tc.want, tc.existing)
			if len(pl.create) != tc.creates || len(pl.stale) != tc.stale || len(pl.needed) != tc.needed || pl.replaced != tc.replaced || pl.added["/id/1"] != tc.addedBefore {
				t.Fatalf("plan: %d creates, %d stale, %d needed, replaced %v, added %v", len(pl.create), len(pl.stale), len(pl.needed), pl.replaced, pl.added)
			}
		})
	}
}

func TestIdentityChanges(t *testing.T) {
	cur := map[string]string{"/id/1": "/ID/1", "/id/3": "/id/3"}
	needed := map[string]string{"/id/1": "/id/1", "/id/2": "/id/2"}
	stale := []*aadv1.AzureAssignedIdentity{assignedFor("/id/3", true), assignedFor("/id/1", true)}
	adds, removals := identityChanges(needed, stale, cur)
	if len(adds) != 1 || adds[0] != "/id/2" || len(removals) != 1 || removals[0] != "/id/3" {
		t.Fatalf("adds %v removals %v", adds, removals)
	}
	// An identity the controller did not add is never removed.
	if _, removals := identityChanges(nil, []*aadv1.AzureAssignedIdentity{assignedFor("/id/3", false)}, cur); len(removals) != 0 {
		t.Fatalf("removed an identity it did not add: %v", removals)
	}
}
