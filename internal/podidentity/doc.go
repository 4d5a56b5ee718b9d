// Package podidentity holds the rules the assignment controller and the node agent share: which
// bindings match a pod (namespaced by default) and how a node names its VM or VMSS.
//
// Pod identity (aad-pod-identity's API and protocols) lives in one directory named podidentity
// per layer:
//
//   - api/aadpodidentity/v1: the CRD types, named for upstream's API group.
//   - internal/podidentity: this package, the matching rules both sides share.
//   - internal/podidentity/nodeagent: the node agent (upstream's NMI), IMDS for pods on one node.
//   - internal/controller/podidentity: the assignment controller (upstream's MIC).
//   - internal/controller/podidentity/podidentitytest: its CRDs and controller, for tests only.
//   - internal/webhook/podidentity: the admission check on pods' aadpodidbinding label.
//   - internal/azure/podidentity.go: PodIdentityCredential, the client of the node agent's host
//     route that the CSI provider uses; it stays in internal/azure because the one credential
//     factory there builds every credential.
package podidentity
