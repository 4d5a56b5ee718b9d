// Package v1api20230101 contains the storage.azure.com API, version v1api20230101: the schema of Azure Service Operator v2's
// kinds of that group and version, reconciled by Cerulean's manager.
// +kubebuilder:object:generate=true
// +groupName=storage.azure.com
package v1api20230101

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "storage.azure.com", Version: "v1api20230101"}
	// SchemeBuilder registers the kinds.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
