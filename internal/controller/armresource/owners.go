package armresource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// azureName is the resource's name in Azure.
func (r *Reconciler) azureName(obj *unstructured.Unstructured) string {
	if n, _, _ := unstructured.NestedString(obj.Object, "spec", "azureName"); n != "" {
		return n
	}
	if r.opts.Kind.DefaultName != nil {
		return r.opts.Kind.DefaultName(obj)
	}
	return obj.GetName()
}

// armID builds the resource's ARM id from the spec (owner, kind, name): the only id the
// reconciler reads, writes or deletes. ready asks for a Ready owner (to create); a deletion
// takes the owner's id as it is.
func (r *Reconciler) armID(ctx context.Context, obj *unstructured.Unstructured, cred *credentials.Credential, ready bool) (string, error) {
	k := r.opts.Kind
	name := r.azureName(obj)
	if k.Owner == OwnerSubscription {
		return "/subscriptions/" + cred.SubscriptionID + "/resourceGroups/" + name, nil
	}
	owner, _, _ := unstructured.NestedMap(obj.Object, "spec", "owner")
	parent, err := r.ownerID(ctx, obj, owner, ready)
	if err != nil {
		return "", err
	}
	if sub := subscriptionOf(parent); sub != "" && !strings.EqualFold(sub, cred.SubscriptionID) {
		return "", fmt.Errorf("%w: the owner is in subscription %s, the credential (%s) in %s", errSubscription, sub, cred.Source, cred.SubscriptionID)
	}
	typ := k.armTypeOf(obj)
	id := parent + k.idSuffix(typ, name)
	if k.Owner == OwnerByType {
		if err := checkIDType(id, typ); err != nil {
			return "", err
		}
	}
	return id, nil
}

func subscriptionOf(id string) string {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) >= 2 && strings.EqualFold(parts[0], "subscriptions") {
		return parts[1]
	}
	return ""
}

// sameID compares ARM ids as ARM does: case-insensitively, ignoring a trailing slash.
func sameID(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "/"), strings.TrimSuffix(b, "/"))
}

// ownerID is the owner's ARM id: given, or read from the owner object (once it is Ready, when
// ready is set).
func (r *Reconciler) ownerID(ctx context.Context, obj *unstructured.Unstructured, owner map[string]any, ready bool) (string, error) {
	if id, _ := owner["armId"].(string); id != "" {
		return strings.TrimSuffix(id, "/"), nil
	}
	name, _ := owner["name"].(string)
	gk := r.ownerKind(owner)
	if !ready {
		return r.objectID(ctx, obj.GetNamespace(), gk.Group, gk.Kind, name)
	}
	id, err := r.readyID(ctx, obj.GetNamespace(), gk.Group, gk.Kind, name, errWaitingForOwner, errOwnerNotFound)
	if errors.Is(err, errWaitingForOwner) {
		// An owner that never gets Ready because it waits for this object: say so.
		if cerr := r.checkCycle(ctx, obj, gk, name); cerr != nil {
			return "", cerr
		}
	}
	return id, err
}

// readyID reads the ARM id of a Ready object of one of our kinds.
func (r *Reconciler) readyID(ctx context.Context, namespace, group, kind, name string, notReady, notFound error) (string, error) {
	o, err := r.readOwned(ctx, namespace, group, kind, name, notFound)
	if err != nil {
		return "", err
	}
	status, _, _ := unstructured.NestedMap(o.Object, "status")
	ready := readyCondition(conditionsOf(status))
	id, _ := status["id"].(string)
	if ready == nil || ready.Status != metav1.ConditionTrue || id == "" {
		return "", fmt.Errorf("%w: %s %s is not Ready yet", notReady, kind, name)
	}
	return id, nil
}

// objectID is the ARM id an object of our kinds shows in status, Ready or not.
func (r *Reconciler) objectID(ctx context.Context, namespace, group, kind, name string) (string, error) {
	o, err := r.readOwned(ctx, namespace, group, kind, name, errOwnerNotFound)
	if err != nil {
		return "", err
	}
	id, _, _ := unstructured.NestedString(o.Object, "status", "id")
	if id == "" {
		return "", fmt.Errorf("%w: %s %s has no Azure id", errOwnerNotFound, kind, name)
	}
	return id, nil
}

func (r *Reconciler) readOwned(ctx context.Context, namespace, group, kind, name string, notFound error) (*unstructured.Unstructured, error) {
	gvk, ok := servedGVK(group, kind)
	if !ok {
		return nil, fmt.Errorf("%w: %s.%s is not a kind Cerulean manages", errReference, kind, group)
	}
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, o); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s %s/%s does not exist", notFound, kind, namespace, name)
		}
		return nil, fmt.Errorf("read %s %s: %w", kind, name, err)
	}
	return o, nil
}

// ownerKind is the group and kind of an owner by name.
func (r *Reconciler) ownerKind(owner map[string]any) schema.GroupKind {
	return ownerKindOf(r.opts.Kind, owner)
}

func ownerKindOf(k Kind, owner map[string]any) (gk schema.GroupKind) {
	if k.Owner == OwnerScope || len(k.OwnerKinds) == 0 {
		gk.Group, _ = owner["group"].(string)
		gk.Kind, _ = owner["kind"].(string)
		if gvk, ok := servedGVK(gk.Group, gk.Kind); ok {
			gk = gvk.GroupKind()
		}
		return gk
	}
	return k.OwnerKinds[0]
}

// maxOwnerChain bounds the walk up an owner chain.
const maxOwnerChain = 32

// checkCycle follows the owners by name from obj's owner; reaching obj again is a cycle (an
// object owning itself is the shortest), which no wait resolves.
func (r *Reconciler) checkCycle(ctx context.Context, obj *unstructured.Unstructured, gk schema.GroupKind, name string) error {
	self := r.opts.Kind.GVK.GroupKind()
	chain := []string{self.Kind + " " + obj.GetName()}
	for range maxOwnerChain {
		chain = append(chain, gk.Kind+" "+name)
		if strings.EqualFold(gk.Group, self.Group) && strings.EqualFold(gk.Kind, self.Kind) && name == obj.GetName() {
			return fmt.Errorf("%w: %s", errOwnerCycle, cycleMessage(chain))
		}
		k, ok := kindOf(gk)
		if !ok || k.Owner == OwnerSubscription {
			return nil
		}
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(k.GVK)
		if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, o); err != nil {
			return nil // missing owners are reported by readyID
		}
		owner, _, _ := unstructured.NestedMap(o.Object, "spec", "owner")
		next, _ := owner["name"].(string)
		if next == "" {
			return nil // an armId ends the chain
		}
		gk, name = ownerKindOf(k, owner), next
	}
	return nil
}

// cycleMessage names a cycle: "the owners form a cycle: RoleAssignment a → RoleAssignment b →
// RoleAssignment a"; an object owning itself says so.
func cycleMessage(chain []string) string {
	if len(chain) == 2 {
		return chain[0] + " names itself as its owner"
	}
	return "the owners form a cycle: " + strings.Join(chain, " → ")
}

// kindOf is the adapter of a group and kind.
func kindOf(gk schema.GroupKind) (Kind, bool) {
	for _, k := range Kinds() {
		if strings.EqualFold(k.GVK.Group, gk.Group) && strings.EqualFold(k.GVK.Kind, gk.Kind) {
			return k, true
		}
	}
	return Kind{}, false
}

// servedGVK maps a group and kind to the version the manager reads.
func servedGVK(group, kind string) (schema.GroupVersionKind, bool) {
	k, ok := kindOf(schema.GroupKind{Group: group, Kind: kind})
	return k.GVK, ok
}
