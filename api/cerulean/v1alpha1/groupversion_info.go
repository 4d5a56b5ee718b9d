// Package v1alpha1 holds Cerulean's own API, group cerulean.dev, version v1alpha1: kinds with no
// upstream equivalent (ControlPlaneIdentities, the HyperShift flow's per-component credentials;
// NamespaceGrant; AzureResource, any ARM resource).
// +kubebuilder:object:generate=true
// +groupName=cerulean.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "cerulean.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the kinds of this group.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ControlPlaneIdentities{}, &ControlPlaneIdentitiesList{}, &NamespaceGrant{}, &NamespaceGrantList{}, &AzureResource{}, &AzureResourceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
