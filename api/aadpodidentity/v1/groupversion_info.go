// Package v1 holds the aad-pod-identity API, group aadpodidentity.k8s.io, version v1: the same
// kinds, field names and casing as upstream's CRDs, so that users' existing objects apply
// unchanged.
// +kubebuilder:object:generate=true
// +groupName=aadpodidentity.k8s.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "aadpodidentity.k8s.io", Version: "v1"}

var (
	// SchemeBuilder registers the kinds of this group.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&AzureIdentity{}, &AzureIdentityList{},
		&AzureIdentityBinding{}, &AzureIdentityBindingList{},
		&AzureAssignedIdentity{}, &AzureAssignedIdentityList{},
		&AzurePodIdentityException{}, &AzurePodIdentityExceptionList{},
	)
	metav1AddToGroupVersion(s)
	return nil
}
