package armresource

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cerulean/cerulean/internal/grants"
)

// +kubebuilder:rbac:groups=cerulean.dev,resources=azureresources,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cerulean.dev,resources=azureresources/status,verbs=get;update;patch

// The generic kind: any ARM resource, its type and api-version read from each object. It is
// the typed kinds' reconciler with three differences, all here: the target (type, api-version)
// comes from the spec and must be on the manager's allow-list; the ARM id hangs off the owner
// as the type says (OwnerByType); `secret` in secretExpressions is the answer of the POST
// action the spec names.

// GroupCerulean is Cerulean's own API group.
const GroupCerulean = "cerulean.dev"

// ReasonTypeNotAllowed is the Ready reason of a generic resource whose type the manager's
// --generic-resource-types does not list.
const ReasonTypeNotAllowed = "TypeNotAllowed"

// errTypeNotAllowed is a generic resource of a type the cluster admin did not allow: refused
// before any Azure call, not retried until the object changes (the allow-list changes only
// with a restart of the manager, which runs every object again).
var errTypeNotAllowed = errors.New("resource type not allowed")

// Spec keys of the generic kind that address the resource: never sent to ARM.
var genericSpecKeys = []string{"type", "apiVersion"}

var (
	armTypeRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z0-9]+)+(/[A-Za-z][-_A-Za-z0-9]*){1,8}$`)
	apiVersionRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-[A-Za-z]+)?$`)
	actionRE     = regexp.MustCompile(`^([A-Za-z0-9][-_.A-Za-z0-9]*/)*list[A-Za-z0-9]*$`)
)

// genericKind is the adapter of AzureResource.
func genericKind() Kind {
	return Kind{
		GVK:          schema.GroupVersionKind{Group: GroupCerulean, Version: "v1alpha1", Kind: "AzureResource"},
		Owner:        OwnerByType,
		Target:       specTarget,
		Prepare:      dropGenericKeys,
		SecretAnswer: actionAnswer,
	}
}

// specTarget reads and checks spec.type and spec.apiVersion (the schema checks them too; an
// object written while the CRD was older must not reach ARM unchecked).
func specTarget(obj *unstructured.Unstructured) (string, string, error) {
	typ, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
	ver, _, _ := unstructured.NestedString(obj.Object, "spec", "apiVersion")
	if !armTypeRE.MatchString(typ) {
		return "", "", fmt.Errorf("%w: spec.type %q is not an ARM resource type (Namespace/type[/child...])", errInvalidSpec, typ)
	}
	if !apiVersionRE.MatchString(ver) {
		return "", "", fmt.Errorf("%w: spec.apiVersion %q is not an ARM api-version (YYYY-MM-DD[-preview])", errInvalidSpec, ver)
	}
	return typ, ver, nil
}

// dropGenericKeys removes what addresses the resource from the body.
func dropGenericKeys(_ context.Context, _ *prepareEnv, body map[string]any) error {
	for _, k := range genericSpecKeys {
		delete(body, k)
	}
	return nil
}

// TypeAllowed reports whether typ is on the allow-list: an entry is a type (compared
// case-insensitively) or a prefix ending in "/*" (Microsoft.ServiceBus/* allows every Service
// Bus type, children included).
func TypeAllowed(allowed []string, typ string) bool {
	for _, a := range allowed {
		a = strings.TrimSpace(a)
		if prefix, ok := strings.CutSuffix(a, "/*"); ok && prefix != "" {
			if len(typ) > len(prefix) && strings.EqualFold(typ[:len(prefix)+1], prefix+"/") {
				return true
			}
			continue
		}
		if a != "" && strings.EqualFold(a, typ) {
			return true
		}
	}
	return false
}

// target is the ARM type and api-version a pass uses: the kind's, or the generic object's own
// once the allow-list admits its type.
func (r *Reconciler) target(obj *unstructured.Unstructured) (string, string, error) {
	k := r.opts.Kind
	if k.Target == nil {
		return k.ARMType, k.APIVersion, nil
	}
	typ, ver, err := k.Target(obj)
	if err != nil {
		return "", "", err
	}
	if !TypeAllowed(r.opts.GenericResourceTypes, typ) {
		return "", "", fmt.Errorf("%w: the manager does not reconcile type %s: its cluster admin allows %s (--generic-resource-types)",
			errTypeNotAllowed, typ, allowedList(r.opts.GenericResourceTypes))
	}
	return typ, ver, nil
}

func allowedList(allowed []string) string {
	if len(allowed) == 0 {
		return "no type"
	}
	return strings.Join(allowed, ", ")
}

// armTypeOf is the type a kind's object names (unchecked): the kind's, or spec.type.
func (k Kind) armTypeOf(obj *unstructured.Unstructured) string {
	if k.Target == nil {
		return k.ARMType
	}
	typ, _, _ := unstructured.NestedString(obj.Object, "spec", "type")
	return typ
}

// idSuffix is what a resource's id adds to its owner's: /providers/{type}/{name}, or for a
// child (OwnerChild, or a generic type of more than one level) /{segment}/{name}.
func (k Kind) idSuffix(armType, name string) string {
	switch {
	case k.Owner == OwnerChild:
		return "/" + k.ChildSegment + "/" + name
	case k.Owner == OwnerByType && strings.Count(armType, "/") > 1:
		return "/" + armType[strings.LastIndex(armType, "/")+1:] + "/" + name
	default:
		return "/providers/" + armType + "/" + name
	}
}

// checkIDType refuses an id whose type is not the spec's: an owner of another type (a queue
// under an Event Hubs namespace) or a name with segments would otherwise send a request for a
// type the allow-list never admitted.
func checkIDType(id, armType string) error {
	if got := typeOfID(id); !strings.EqualFold(got, armType) {
		if got == "" {
			got = "no resource type"
		}
		return fmt.Errorf("%w: the owner and name give %s, which is %s, not %s: a child type's owner must be a resource of its parent type",
			errInvalidSpec, id, got, armType)
	}
	return nil
}

// typeOfID is the ARM type of the resource an id names: the namespace after the last
// "providers" segment and every type segment after it; "" when the id names none.
func typeOfID(id string) string {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	last := -1
	for i := 0; i+1 < len(segs); i += 2 {
		if strings.EqualFold(segs[i], "providers") {
			last = i
		}
	}
	if last < 0 {
		return ""
	}
	rest := segs[last+2:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		return ""
	}
	typ := segs[last+1]
	for i := 0; i < len(rest); i += 2 {
		if rest[i] == "" || rest[i+1] == "" {
			return ""
		}
		typ += "/" + rest[i]
	}
	return typ
}

// actionAnswer is the answer of the spec's operatorSpec.action (a POST below the resource),
// what secretExpressions see as `secret`; an empty map without an action.
func actionAnswer(ctx context.Context, env *exportEnv) (map[string]any, error) {
	action, _, _ := unstructured.NestedString(env.obj.Object, "spec", "operatorSpec", "action")
	if action == "" {
		return map[string]any{}, nil
	}
	if !actionRE.MatchString(action) {
		return nil, fmt.Errorf("%w: operatorSpec.action %q is not a list* action below the resource", errInvalidSpec, action)
	}
	res, err := env.reader.post(ctx, env.id+"/"+action, env.apiVersion)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", action, err)
	}
	if res == nil {
		res = map[string]any{}
	}
	return res, nil
}

// References are the ARM ids an object's spec names, which a namespace must have been granted
// to use the global credential: every armId reference, and for the generic kind also every
// string of its ARM body that is an ARM id (a subnet's networkSecurityGroup.id, a link's
// virtualNetwork.id), since the body is sent to ARM as it is.
func References(obj *unstructured.Unstructured) []string {
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	refs := grants.References(spec)
	if obj.GroupVersionKind().GroupKind() != genericKind().GVK.GroupKind() {
		return refs
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		case string:
			if len(t) > len("/subscriptions/") && strings.EqualFold(t[:len("/subscriptions/")], "/subscriptions/") {
				refs = append(refs, t)
			}
		}
	}
	for k, v := range spec {
		if !operatorKeys[k] {
			walk(v)
		}
	}
	return refs
}
