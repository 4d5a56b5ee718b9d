package nodeagent

// What the node agent reads and writes (its ClusterRole, cerulean-node-agent, generated into
// config/rbac/node-agent by `make generate`): pods to find a request's pod by source IP, pod
// identity's objects to find the pod's identity, Events to audit every issuance, and the
// clientPassword Secret of a service-principal AzureIdentity (get only, one at a time; never
// listed or watched, so no Secret is cached on the node).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=aadpodidentity.k8s.io,resources=azureassignedidentities;azureidentitybindings;azureidentities;azurepodidentityexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=get;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
