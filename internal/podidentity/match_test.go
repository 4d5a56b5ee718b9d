package podidentity

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
)

func TestMatchesIsNamespacedUnlessTheIdentityAllowsOthers(t *testing.T) {
	id := func(ns, name, allow string) aadv1.AzureIdentity {
		i := aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if allow != "" {
			i.Annotations = map[string]string{aadv1.AllowedNamespacesAnnotation: allow}
		}
		return i
	}
	binding := func(ns, name, identity, sel string) aadv1.AzureIdentityBinding {
		return aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: identity, Selector: sel}}
	}
	pod := func(ns, label string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{aadv1.PodLabel: label}}}
	}
	bindings := []aadv1.AzureIdentityBinding{binding("a", "b1", "id1", "app"), binding("b", "b2", "id2", "app"), binding("a", "b3", "missing", "app")}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		identities []aadv1.AzureIdentity
		want       []string
	}{
		{"own namespace only", pod("a", "app"), []aadv1.AzureIdentity{id("a", "id1", ""), id("b", "id2", "")}, []string{"a/b1"}},
		{"other namespace refused", pod("c", "app"), []aadv1.AzureIdentity{id("a", "id1", ""), id("b", "id2", "")}, nil},
		{"listed namespace allowed", pod("c", "app"), []aadv1.AzureIdentity{id("a", "id1", "x, c"), id("b", "id2", "")}, []string{"a/b1"}},
		{"star allows all", pod("c", "app"), []aadv1.AzureIdentity{id("a", "id1", "*"), id("b", "id2", "*")}, []string{"a/b1", "b/b2"}},
		{"other label", pod("a", "other"), []aadv1.AzureIdentity{id("a", "id1", "")}, nil},
		{"no label", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a"}}, []aadv1.AzureIdentity{id("a", "id1", "")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, m := range Matches(tc.pod, bindings, tc.identities) {
				got = append(got, m.Binding.Namespace+"/"+m.Binding.Name)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestParseProviderID(t *testing.T) {
	const sub = "00000000-0000-0000-0000-000000000001"
	vm, err := ParseProviderID("azure:///subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1")
	if err != nil || vm.ScaleSet || vm.ID != "/subscriptions/"+sub+"/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1" {
		t.Fatalf("vm: %+v %v", vm, err)
	}
	ss, err := ParseProviderID("azure:///subscriptions/" + sub + "/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool/virtualMachines/3")
	if err != nil || !ss.ScaleSet || ss.Name != "aks-pool" || ss.ResourceGroup != "MC_rg" ||
		ss.ID != "/subscriptions/"+sub+"/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool" {
		t.Fatalf("vmss: %+v %v", ss, err)
	}
	for _, bad := range []string{"", "kind://x", "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d",
		"azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/ss",
		"azure:///subscriptions//resourceGroups/g/providers/Microsoft.Compute/virtualMachines/v"} {
		if _, err := ParseProviderID(bad); !errors.Is(err, ErrProviderID) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
}

func FuzzParseProviderID(f *testing.F) {
	f.Add("azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/v")
	f.Add("azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0")
	f.Add("azure://")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseProviderID(s)
		if err != nil {
			return
		}
		again, err := ParseProviderID("azure://" + c.ID + map[bool]string{true: "/virtualMachines/0", false: ""}[c.ScaleSet])
		if err != nil || again != c {
			t.Fatalf("%q parsed to %+v, which does not round-trip: %+v %v", s, c, again, err)
		}
	})
}
