// Package v20250601 contains the storage.azure.com API, version v20250601: the schema of Azure Service Operator v2's
// kinds of that group and version, reconciled by Cerulean's manager.
// +kubebuilder:object:generate=true
// +groupName=storage.azure.com
package v20250601

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "storage.azure.com", Version: "v20250601"}
	// SchemeBuilder registers the kinds.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// objects are the kinds' types; each types file adds its own.
var objects []runtime.Object

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objects...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
