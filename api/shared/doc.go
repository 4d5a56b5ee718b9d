// Package shared holds the API shapes every Cerulean resource kind shares with Azure Service
// Operator v2: owner and resource references, ConfigMap references, export destinations, CEL
// export expressions, and the Ready condition with its severities and reasons.
// +kubebuilder:object:generate=true
package shared
