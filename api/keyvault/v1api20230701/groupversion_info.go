// Package v1api20230701 contains the keyvault.azure.com API, version v1api20230701: the schema of Azure Service Operator v2's
// kinds of that group and version, reconciled by Cerulean's manager.
// +kubebuilder:object:generate=true
// +groupName=keyvault.azure.com
package v1api20230701

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these kinds.
	GroupVersion = schema.GroupVersion{Group: "keyvault.azure.com", Version: "v1api20230701"}
	// SchemeBuilder registers the kinds.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
