package podidentity

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
)

// Match is one binding that selects a pod, with the identity it names.
type Match struct {
	Binding  *aadv1.AzureIdentityBinding
	Identity *aadv1.AzureIdentity
}

// AllowsNamespace reports whether bindings of identity id may match pods of namespace ns: always
// its own namespace; others only when the identity's AllowedNamespacesAnnotation lists ns or "*".
func AllowsNamespace(id *aadv1.AzureIdentity, ns string) bool {
	if id.Namespace == ns {
		return true
	}
	for n := range strings.SplitSeq(id.Annotations[aadv1.AllowedNamespacesAnnotation], ",") {
		if n = strings.TrimSpace(n); n == "*" || n == ns {
			return true
		}
	}
	return false
}

// Matches returns the bindings that select pod, in a stable order (binding namespace, name):
// the pod's aadpodidbinding label equals the binding's selector, the binding's AzureIdentity
// exists in the binding's namespace, and that identity allows the pod's namespace.
func Matches(pod *corev1.Pod, bindings []aadv1.AzureIdentityBinding, identities []aadv1.AzureIdentity) []Match {
	label, ok := pod.Labels[aadv1.PodLabel]
	if !ok || label == "" {
		return nil
	}
	byName := make(map[string]*aadv1.AzureIdentity, len(identities))
	for i := range identities {
		byName[identities[i].Namespace+"/"+identities[i].Name] = &identities[i]
	}
	var out []Match
	for i := range bindings {
		b := &bindings[i]
		if b.Spec.Selector != label || b.DeletionTimestamp != nil {
			continue
		}
		id := byName[b.Namespace+"/"+b.Spec.AzureIdentity]
		if id == nil || id.DeletionTimestamp != nil || !AllowsNamespace(id, pod.Namespace) {
			continue
		}
		out = append(out, Match{Binding: b, Identity: id})
	}
	slices.SortFunc(out, func(a, b Match) int {
		return strings.Compare(a.Binding.Namespace+"/"+a.Binding.Name, b.Binding.Namespace+"/"+b.Binding.Name)
	})
	return out
}

// ErrProviderID is returned for a spec.providerID that names no Azure VM or scale-set instance.
var ErrProviderID = errors.New("not an Azure VM or scale-set instance provider id")

// Compute is what a node runs on: a VM, or an instance of a VM scale set.
type Compute struct {
	// ID is the ARM id of the VM or of the scale set (not of the instance): identities are
	// assigned there.
	ID string
	// ScaleSet reports whether ID is a scale set.
	ScaleSet bool
	// SubscriptionID, ResourceGroup and Name split ID.
	SubscriptionID, ResourceGroup, Name string
}

// ParseProviderID maps a node's spec.providerID, as AKS sets it
// (azure:///subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/virtualMachines/NAME or
// .../virtualMachineScaleSets/SS/virtualMachines/N), to its compute resource.
func ParseProviderID(providerID string) (Compute, error) {
	rest, ok := strings.CutPrefix(providerID, "azure://")
	if !ok {
		return Compute{}, fmt.Errorf("parse provider id %q: %w", providerID, ErrProviderID)
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	// subscriptions S resourceGroups G providers Microsoft.Compute KIND NAME [virtualMachines N]
	if len(parts) != 8 && len(parts) != 10 || !strings.EqualFold(parts[0], "subscriptions") ||
		!strings.EqualFold(parts[2], "resourceGroups") || !strings.EqualFold(parts[4], "providers") ||
		!strings.EqualFold(parts[5], "Microsoft.Compute") || slices.Contains(parts, "") {
		return Compute{}, fmt.Errorf("parse provider id %q: %w", providerID, ErrProviderID)
	}
	c := Compute{SubscriptionID: parts[1], ResourceGroup: parts[3], Name: parts[7]}
	switch {
	case len(parts) == 8 && strings.EqualFold(parts[6], "virtualMachines"):
	case len(parts) == 10 && strings.EqualFold(parts[6], "virtualMachineScaleSets") && strings.EqualFold(parts[8], "virtualMachines"):
		c.ScaleSet = true
	default:
		return Compute{}, fmt.Errorf("parse provider id %q: %w", providerID, ErrProviderID)
	}
	kind := "virtualMachines"
	if c.ScaleSet {
		kind = "virtualMachineScaleSets"
	}
	c.ID = "/subscriptions/" + c.SubscriptionID + "/resourceGroups/" + c.ResourceGroup + "/providers/Microsoft.Compute/" + kind + "/" + c.Name
	return c, nil
}
