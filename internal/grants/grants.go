// Package grants decides what a namespace may use in Azure: the identities and ARM scopes its
// cluster admin granted it with NamespaceGrant objects. Pure functions: the admission webhooks
// and the controllers list the grants and ask here, so both refuse the same things with the
// same words.
package grants

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
)

// ErrNotGranted marks a refusal: the namespace was not granted what it names.
var ErrNotGranted = errors.New("not granted")

// Refusal says what a namespace lacks and which grant adds it.
type Refusal struct {
	// Namespace is the namespace refused.
	Namespace string
	// Field is the NamespaceGrant field to add to: "identities" or "scopes".
	Field string
	// Values are what the namespace lacks.
	Values []string
}

func (r *Refusal) Error() string {
	what := map[string]string{"identities": "identity", "scopes": "ARM scope"}[r.Field]
	return fmt.Sprintf("namespace %s is not granted the %s %s: a cluster admin grants it by adding it to spec.%s of a NamespaceGrant (cerulean.dev/v1alpha1) whose spec.namespaces lists %s",
		r.Namespace, what, strings.Join(r.Values, ", "), r.Field, r.Namespace)
}

// Is makes errors.Is(err, ErrNotGranted) true for a *Refusal.
func (r *Refusal) Is(target error) bool { return target == ErrNotGranted }

// AllIdentities grants every identity as an entry of spec.identities (a platform namespace).
// Its counterpart for scopes is "/subscriptions/*".
const AllIdentities = "*"

// Identity is what an AzureIdentity names.
type Identity struct {
	ResourceID string
	ClientID   string
}

// For returns the grants that list namespace ns.
func For(all []ceruleanv1.NamespaceGrant, ns string) []ceruleanv1.NamespaceGrant {
	var out []ceruleanv1.NamespaceGrant
	for _, g := range all {
		if slices.Contains(g.Spec.Namespaces, ns) {
			out = append(out, g)
		}
	}
	return out
}

// CheckIdentity returns nil when ns was granted every id the identity names: its client id
// (listed) and its resource id (listed, or under a listed scope: a resource group's id grants
// every identity in it). Both are checked because both are used: the resource id is put on the
// node, the client id selects the token the node's IMDS returns, so an ungranted client id next
// to a granted resource id would still reach another namespace's identity on the same node.
func CheckIdentity(all []ceruleanv1.NamespaceGrant, ns string, id Identity) error {
	mine := For(all, ns)
	var missing []string
	if id.ResourceID != "" && !anyEntry(mine, func(e string) bool { return e == AllIdentities || Covers(e, id.ResourceID) }) {
		missing = append(missing, id.ResourceID)
	}
	if id.ClientID != "" && !anyEntry(mine, func(e string) bool { return e == AllIdentities || strings.EqualFold(e, id.ClientID) }) {
		missing = append(missing, id.ClientID)
	}
	if len(missing) == 0 {
		return nil
	}
	return &Refusal{Namespace: ns, Field: "identities", Values: missing}
}

func anyEntry(gs []ceruleanv1.NamespaceGrant, ok func(string) bool) bool {
	for _, g := range gs {
		if slices.ContainsFunc(g.Spec.Identities, ok) {
			return true
		}
	}
	return false
}

// CheckAzureIdentity checks an AzureIdentity for use in namespace ns (its own, or a pod's that
// its bindings select): the ids it names must be granted to ns. A service principal is named by
// its client id only.
func CheckAzureIdentity(all []ceruleanv1.NamespaceGrant, ns string, ai *aadv1.AzureIdentity) error {
	if ai.Spec.Type != aadv1.UserAssignedMSI {
		return CheckIdentity(all, ns, Identity{ClientID: ai.Spec.ClientID})
	}
	return CheckIdentity(all, ns, Identity{ResourceID: ai.Spec.ResourceID, ClientID: ai.Spec.ClientID})
}

// CheckSecret refuses a service principal's AzureIdentity whose clientPassword Secret is in
// another namespace: that Secret is another namespace's credential. (The node agent refuses
// such an identity's tokens too; admission says so at once.)
func CheckSecret(ai *aadv1.AzureIdentity) error {
	if ai.Spec.Type == aadv1.UserAssignedMSI {
		return nil
	}
	if sns := ai.Spec.ClientPassword.Namespace; sns != "" && sns != ai.Namespace {
		return fmt.Errorf("%w: AzureIdentity %s/%s names the Secret %s/%s; a service principal's Secret must be in the identity's own namespace",
			ErrNotGranted, ai.Namespace, ai.Name, sns, ai.Spec.ClientPassword.Name)
	}
	return nil
}

// CheckScopes returns nil when every ARM id of ids is covered by a scope granted to ns, or a
// *Refusal listing those that are not.
func CheckScopes(all []ceruleanv1.NamespaceGrant, ns string, ids []string) error {
	mine := For(all, ns)
	var missing []string
	for _, id := range ids {
		ok := false
		for _, g := range mine {
			for _, s := range g.Spec.Scopes {
				if Covers(s, id) {
					ok = true
				}
			}
		}
		if !ok && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return &Refusal{Namespace: ns, Field: "scopes", Values: missing}
}

// Covers reports whether ARM id is scope or under it, case-insensitively and on segment
// boundaries. A scope whose last segment ends in '*' matches that segment by prefix
// (/subscriptions/S/resourceGroups/team-a-* covers /subscriptions/S/resourceGroups/team-a-web/...).
// Ids with "." or ".." segments, or empty ones inside, are never covered: ARM ids are plain.
func Covers(scope, id string) bool {
	s := segments(scope)
	p := segments(id)
	if s == nil || p == nil || len(p) < len(s) {
		return false
	}
	for i, seg := range s {
		if last := i == len(s)-1; last && strings.HasSuffix(seg, "*") {
			if !strings.HasPrefix(p[i], strings.TrimSuffix(seg, "*")) {
				return false
			}
			continue
		}
		if seg != p[i] {
			return false
		}
	}
	return true
}

// segments is id's lowercased path segments; nil when id is not a plain absolute path.
func segments(id string) []string {
	if !strings.HasPrefix(id, "/") {
		return nil
	}
	parts := strings.Split(strings.ToLower(strings.TrimSuffix(id, "/")[1:]), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil
		}
	}
	return parts
}

// References are the ARM ids an Azure resource's spec refers to: every "armId" value under it
// (owner.armId, a RoleAssignment's scope, references to other resources), except a role
// assignment's roleDefinitionReference, which names a role, not a place to act on.
func References(spec map[string]any) []string {
	var out []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch t := v.(type) {
		case map[string]any:
			if key == "roleDefinitionReference" {
				return
			}
			for k, c := range t {
				if k == "armId" {
					if s, ok := c.(string); ok && s != "" {
						out = append(out, s)
					}
					continue
				}
				walk(k, c)
			}
		case []any:
			for _, c := range t {
				walk(key, c)
			}
		}
	}
	walk("", spec)
	sort.Strings(out)
	return slices.Compact(out)
}
