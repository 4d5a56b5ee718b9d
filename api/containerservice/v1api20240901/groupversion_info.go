// Package v1api20240901 contains the containerservice.azure.com API, version v1api20240901: the schema of Azure Service Operator v2's
// kinds of that group and version, reconciled by Cerulean's manager.
// +kubebuilder:object:generate=true
// +groupName=containerservice.azure.com
package v1api20240901

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "containerservice.azure.com", Version: "v1api20240901"}
	// SchemeBuilder registers the kinds.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
