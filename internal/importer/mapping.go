package importer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cerulean/cerulean/internal/controller/armresource"
)

// The generic kind, written as unstructured YAML (the Go types live with its controller).
const (
	genericGroup      = "cerulean.dev"
	genericAPIVersion = genericGroup + "/v1alpha1"
	genericKind       = "AzureResource"
)

// ARM's top-level members a spec may hold; id, name, type, etag and systemData are ARM's own.
var armTopLevel = map[string]bool{
	"location": true, "tags": true, "kind": true, "sku": true, "identity": true,
	"extendedLocation": true, "zones": true, "plan": true, "managedBy": true, "properties": true,
}

// readOnly are, per kind, the property paths (dotted, under properties) ARM computes: status,
// not spec. provisioningState is read-only everywhere.
var readOnly = map[string][]string{
	"UserAssignedIdentity": {"clientId", "principalId", "tenantId"},
	"Vault":                {"vaultUri", "hsmPoolResourceId", "privateEndpointConnections"},
	"RoleAssignment":       {"scope", "createdOn", "updatedOn", "createdBy", "updatedBy"},
	"StorageAccount": {"primaryEndpoints", "primaryLocation", "statusOfPrimary", "secondaryEndpoints", "secondaryLocation",
		"statusOfSecondary", "creationTime", "keyCreationTime", "lastGeoFailoverTime", "geoReplicationStats",
		"privateEndpointConnections", "blobRestoreStatus", "storageAccountSkuConversionStatus"},
	"ManagedCluster": {"fqdn", "azurePortalFQDN", "privateFQDN", "powerState", "currentKubernetesVersion", "maxAgentPools",
		"resourceUID", "oidcIssuerProfile.issuerURL"},
	"FlexibleServer": {"fullyQualifiedDomainName", "state", "minorVersion", "replicaCapacity", "privateEndpointConnections",
		"highAvailability.state", "backup.earliestRestoreDate"},
	"FlexibleServersConfiguration": {"description", "defaultValue", "dataType", "allowedValues", "isConfigPendingRestart",
		"isDynamicConfig", "isReadOnly", "documentationLink", "unit"},
	"Redis": {"hostName", "port", "sslPort", "linkedServers", "instances", "privateEndpointConnections", "accessKeys"},
	"StorageAccountsBlobServicesContainer": {"lastModifiedTime", "leaseStatus", "leaseState", "leaseDuration",
		"hasImmutabilityPolicy", "hasLegalHold", "deleted", "deletedTime", "remainingRetentionDays", "version",
		"immutabilityPolicy", "legalHold"},
	"StorageAccountsQueueServicesQueue": {"approximateMessageCount"},
	"StorageAccountsTableServicesTable": {"tableName"},
}

// readOnlyTop are, per kind, top-level members ARM computes (a storage service's sku is its
// account's).
var readOnlyTop = map[string][]string{
	"StorageAccountsBlobService":  {"sku"},
	"StorageAccountsQueueService": {"sku"},
	"StorageAccountsTableService": {"sku"},
}

// manifestOf is res's manifest.
func manifestOf(res *resource, all map[string]*resource, o Options) (Manifest, error) {
	var m Manifest
	spec := specOf(res)
	meta := map[string]any{"name": res.name}
	if o.Namespace != "" {
		meta["namespace"] = o.Namespace
	}
	ann := map[string]any{}
	if o.ReconcilePolicy != "" {
		ann[armresource.AnnotationReconcilePolicy] = o.ReconcilePolicy
	}
	owner, err := ownerOf(res, all)
	if err != nil {
		return m, err
	}
	if owner != nil {
		spec["owner"] = owner
	}
	if res.kind == nil {
		m.Object = map[string]any{"apiVersion": genericAPIVersion, "kind": genericKind, "metadata": meta, "spec": spec}
		spec["type"], spec["apiVersion"], spec["azureName"] = res.armType, res.apiVersion, res.id.Name
		m.Comments = append(m.Comments, fmt.Sprintf("%s %s: Cerulean has no typed kind for %s; the generic kind adopts it.", res.armType, res.id.Name, res.armType))
		// As for the typed kinds below: adopted with a read, not a PUT.
		if hash, ok := genericHash(spec); ok {
			ann[armresource.AnnotationAppliedHash] = hash
			if o.ReconcilePolicy != armresource.PolicySkip {
				meta["finalizers"] = []any{armresource.Finalizer}
			}
		}
		if len(ann) > 0 {
			meta["annotations"] = ann
		}
		return m, nil
	}
	k := res.kind
	if res.name != res.id.Name || k.DefaultName != nil {
		// A kind with a default of its own (a role assignment's GUID from the object's name)
		// would otherwise address another resource.
		spec["azureName"] = res.id.Name
	}
	m.Comments = append(m.Comments, res.id.String())
	m.Comments = append(m.Comments, secretInputs(res, spec, o)...)
	// The body this spec makes is what ARM holds: the manager reads and compares instead of
	// sending it again. A manifest edited before it is applied hashes differently and is sent.
	if hash, ok := k.BodyHash(spec); ok {
		ann[armresource.AnnotationAppliedHash] = hash
		if o.ReconcilePolicy != armresource.PolicySkip {
			// The manager adds its finalizer before its first write; an adopted resource may
			// never need one, and deleting its object must still delete it (unless detached).
			meta["finalizers"] = []any{armresource.Finalizer}
		}
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	m.Object = map[string]any{"apiVersion": k.GVK.GroupVersion().String(), "kind": k.GVK.Kind, "metadata": meta, "spec": spec}
	return m, nil
}

// genericHash is the applied hash the manager computes for a generic spec: the generic kind's
// body is the spec's ARM members as they are, less type and apiVersion (which its Prepare
// drops; BodyHash runs no Prepare that needs the API server, so that step is done here).
func genericHash(spec map[string]any) (string, bool) {
	for _, k := range armresource.Kinds() {
		if k.GVK.Group != genericGroup || k.GVK.Kind != genericKind {
			continue
		}
		body := make(map[string]any, len(spec))
		for key, v := range spec {
			if key != "type" && key != "apiVersion" {
				body[key] = v
			}
		}
		k.Prepare = nil
		return k.BodyHash(body)
	}
	return "", false
}

// specOf is the spec that makes ARM's body: for the generic kind ARM's members as they are; for
// a typed kind the inverse of the reconciler's armBody (a flattened kind's properties lifted to
// the top, keys the kind sends under properties moved back), read-only members dropped.
func specOf(res *resource) map[string]any {
	body := normalize(runtime.DeepCopyJSONValue(res.body)).(map[string]any) // ARM's JSON, decoded
	kindName := ""
	if res.kind != nil {
		kindName = res.kind.GVK.Kind
	}
	spec := map[string]any{}
	for k, v := range body {
		if armTopLevel[k] {
			spec[k] = v
		}
	}
	for _, k := range readOnlyTop[kindName] {
		delete(spec, k)
	}
	cleanIdentity(spec)
	props, _ := spec["properties"].(map[string]any)
	delete(spec, "properties")
	if props != nil {
		delete(props, "provisioningState")
		for _, p := range readOnly[kindName] {
			removePath(props, strings.Split(p, "."))
		}
	}
	if kindName == "RoleAssignment" && props != nil {
		if def, ok := props["roleDefinitionId"].(string); ok {
			props["roleDefinitionReference"] = map[string]any{"armId": def}
			delete(props, "roleDefinitionId")
		}
	}
	switch {
	case res.kind == nil || !res.kind.Flatten:
		if len(props) > 0 {
			spec["properties"] = props
		}
	default:
		moved := map[string]bool{}
		for _, k := range res.kind.PropertyKeys {
			moved[k] = true
		}
		nested := map[string]any{}
		for k, v := range props {
			switch {
			case !armTopLevel[k]:
				spec[k] = v
			case moved[k]:
				spec[k] = v // the reconciler moves it back under properties
			default:
				nested[k] = v // a property named like a top-level member stays under properties
			}
		}
		if len(nested) > 0 {
			spec["properties"] = nested
		}
	}
	for k, v := range spec {
		if isEmpty(v) {
			delete(spec, k)
		}
	}
	return spec
}

// cleanIdentity drops what ARM computes in a managed-identity block: the system identity's
// principal and tenant, each user-assigned identity's client and principal ids.
func cleanIdentity(spec map[string]any) {
	id, ok := spec["identity"].(map[string]any)
	if !ok {
		return
	}
	delete(id, "principalId")
	delete(id, "tenantId")
	if uai, ok := id["userAssignedIdentities"].(map[string]any); ok {
		for k := range uai {
			uai[k] = map[string]any{}
		}
	}
}

// secretInputs removes the kind's secret inputs from spec (ARM never returns them; should an
// answer hold one, it is not written) and says, in comments, how to give them.
func secretInputs(res *resource, spec map[string]any, o Options) []string {
	var out []string
	for _, p := range res.kind.SecretInputs {
		removePath(spec, strings.Split(p, "."))
		secret := res.name + "-secret"
		if o.SecretReferences {
			ref := map[string]any{"name": secret, "key": p}
			setPath(spec, strings.Split(p, "."), ref)
			out = append(out,
				fmt.Sprintf("spec.%s reads key %s of Secret %s, which you create before applying", p, p, secret),
				fmt.Sprintf("(kubectl create secret generic %s --from-literal=%s=...): the manager sets it in Azure.", secret, p))
			continue
		}
		out = append(out,
			fmt.Sprintf("spec.%s is not imported: Azure never returns it, and it stays as it is.", p),
			fmt.Sprintf("To manage it from Kubernetes, create a Secret (kubectl create secret generic %s --from-literal=%s=...)", secret, p),
			fmt.Sprintf("and add  %s: {name: %s, key: %s}  to the spec: the manager then sets it in Azure.", p, secret, p))
	}
	return out
}

// ownerOf links res to its owner: by name when the owner is imported too, else by ARM id.
func ownerOf(res *resource, all map[string]*resource) (map[string]any, error) {
	if res.kind != nil && res.kind.Owner == armresource.OwnerSubscription {
		return nil, nil
	}
	parent := res.id.Parent
	if res.kind != nil && res.kind.Owner == armresource.OwnerScope {
		parent = scopeOf(res.id)
	}
	if parent == nil || parent.ResourceType.String() == "Microsoft.Resources/subscriptions" {
		if res.kind == nil {
			return nil, nil // a subscription-level resource: the credential's subscription
		}
		return nil, fmt.Errorf("%s has no owner resource", res.id)
	}
	owner, ok := all[strings.ToLower(parent.String())]
	if !ok {
		return map[string]any{"armId": parent.String()}, nil
	}
	ref := map[string]any{"name": owner.name}
	if res.kind == nil || res.kind.Owner == armresource.OwnerScope {
		group, kind := genericGroup, genericKind
		if owner.kind != nil {
			group, kind = owner.kind.GVK.Group, owner.kind.GVK.Kind
		}
		ref["group"], ref["kind"] = group, kind
	}
	return ref, nil
}

// scopeOf is an extension resource's scope: its id before "/providers/Microsoft.Authorization/...".
func scopeOf(id *arm.ResourceID) *arm.ResourceID {
	s := id.String()
	i := strings.LastIndex(strings.ToLower(s), "/providers/")
	if i <= 0 {
		return nil
	}
	scope, err := arm.ParseResourceID(s[:i])
	if err != nil {
		return nil
	}
	return scope
}

// nameResources gives each resource its Kubernetes name: its Azure name as a DNS label, a
// child's prefixed by its parent's (children of different parents share names: "default"),
// unique per kind.
func nameResources(order []*resource, all map[string]*resource) {
	taken := map[string]bool{}
	for _, res := range order { // parents come first
		name := dnsLabel(res.id.Name)
		if p := res.id.Parent; p != nil && isChild(res) {
			if parent, ok := all[strings.ToLower(p.String())]; ok {
				name = dnsLabel(parent.name + "-" + res.id.Name)
			}
		}
		kind := genericKind
		if res.kind != nil {
			kind = res.kind.GVK.Kind
		}
		if taken[kind+"/"+name] {
			name = withHash(name, res.id.String())
		}
		taken[kind+"/"+name] = true
		res.name = name
	}
}

// isChild reports a resource whose ARM id is under another resource's (not a resource group's).
func isChild(res *resource) bool {
	p := res.id.Parent
	return p != nil && p.ResourceType.Namespace != "Microsoft.Resources"
}

// dnsLabel makes s a Kubernetes name: lower case letters, digits and '-', at most 63, starting
// and ending with a letter or digit.
func dnsLabel(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return withHash("resource", s)
	}
	if len(out) > 63 {
		return withHash(out, s)
	}
	return out
}

// withHash makes name unique by a digest of the id it stands for, within 63 characters.
func withHash(name, id string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(id)))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if len(name) > 63-len(suffix) {
		name = strings.TrimRight(name[:63-len(suffix)], "-")
	}
	return name + suffix
}

// normalize turns JSON's float64 integers into int64, so manifests show 32, not 3.2e+01.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = normalize(e)
		}
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	}
	return v
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return false
	case string:
		return t == ""
	}
	return v == nil
}

func removePath(m map[string]any, path []string) {
	for i, p := range path {
		if i == len(path)-1 {
			delete(m, p)
			return
		}
		next, ok := m[p].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
