// Package armid parses Azure Resource Manager resource ids, the paths ARM routes on:
//
//	/subscriptions/{s}[/resourceGroups/{rg}][/providers/{Namespace}/{type}/{name}[/{childType}/{childName}]...]...
//
// ending either at a name (a resource) or at a type (a collection). Keywords are matched
// case-insensitively and names keep the case they were given in, as ARM does.
package armid

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is returned for a path that is not a resource id.
var ErrInvalid = errors.New("invalid resource id")

// Limits that keep a hostile path cheap to parse.
const (
	MaxLength   = 2048
	MaxSegments = 64
)

// The namespace of the implicit levels.
const resourcesNamespace = "Microsoft.Resources"

// Segment is one level of an id: a type and, unless it ends a collection, a name.
type Segment struct {
	Namespace string // "Microsoft.Resources" for subscriptions and resource groups
	Type      string // as given, e.g. "userAssignedIdentities"
	Name      string // "" for the final segment of a collection
	// Provider is true where the segment starts a "/providers/{Namespace}" group: the
	// resource is either a top-level resource of the namespace or an extension resource of the
	// scope before it.
	Provider bool
}

// ID is a parsed resource id or collection path.
type ID struct {
	Segments []Segment // empty for the root scope "/"
}

// Root is the tenant root scope "/".
var Root = ID{}

// Parse parses a URL path. A trailing slash is ignored.
func Parse(path string) (ID, error) {
	if len(path) > MaxLength {
		return ID{}, fmt.Errorf("%w: longer than %d characters", ErrInvalid, MaxLength)
	}
	if !strings.HasPrefix(path, "/") {
		return ID{}, fmt.Errorf("%w: must start with '/'", ErrInvalid)
	}
	if path == "/" {
		return Root, nil
	}
	trimmed := strings.TrimSuffix(path[1:], "/")
	if trimmed == "" {
		return ID{}, fmt.Errorf("%w: empty segment", ErrInvalid)
	}
	parts := strings.Split(trimmed, "/")
	if len(parts) > MaxSegments {
		return ID{}, fmt.Errorf("%w: more than %d segments", ErrInvalid, MaxSegments)
	}
	for _, p := range parts {
		if p == "" {
			return ID{}, fmt.Errorf("%w: empty segment", ErrInvalid)
		}
	}
	var id ID
	i := 0
	if strings.EqualFold(parts[0], "subscriptions") {
		id.Segments = append(id.Segments, Segment{Namespace: resourcesNamespace, Type: "subscriptions", Name: at(parts, 1)})
		i = 2
		if i < len(parts) && strings.EqualFold(parts[i], "resourceGroups") {
			id.Segments = append(id.Segments, Segment{Namespace: resourcesNamespace, Type: "resourceGroups", Name: at(parts, i+1)})
			i += 2
		}
	}
	for i < len(parts) {
		if !strings.EqualFold(parts[i], "providers") {
			return ID{}, fmt.Errorf("%w: expected 'providers' at segment %d", ErrInvalid, i+1)
		}
		if i+2 >= len(parts) {
			return ID{}, fmt.Errorf("%w: 'providers' needs a namespace and a type", ErrInvalid)
		}
		ns := parts[i+1]
		if !validNamespace(ns) {
			return ID{}, fmt.Errorf("%w: bad namespace", ErrInvalid)
		}
		i += 2
		first := true
		// Types and names alternate until a type position holds "providers" (a new group).
		for i < len(parts) {
			if !first && strings.EqualFold(parts[i], "providers") {
				break
			}
			id.Segments = append(id.Segments, Segment{Namespace: ns, Type: parts[i], Name: at(parts, i+1), Provider: first})
			first = false
			i += 2
		}
	}
	// Only the last segment may lack a name.
	for _, s := range id.Segments[:len(id.Segments)-1] {
		if s.Name == "" {
			return ID{}, fmt.Errorf("%w: %s has no name", ErrInvalid, s.Type)
		}
	}
	return id, nil
}

func at(parts []string, i int) string {
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

func validNamespace(ns string) bool {
	if len(ns) > 128 || !strings.Contains(ns, ".") {
		return false
	}
	for _, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.') {
			return false
		}
	}
	return true
}

// IsRoot reports whether the id is the tenant root scope.
func (id ID) IsRoot() bool { return len(id.Segments) == 0 }

// IsCollection reports whether the id ends at a type rather than a name.
func (id ID) IsCollection() bool {
	return len(id.Segments) > 0 && id.Segments[len(id.Segments)-1].Name == ""
}

// Last is the final segment; the zero Segment for the root.
func (id ID) Last() Segment {
	if len(id.Segments) == 0 {
		return Segment{}
	}
	return id.Segments[len(id.Segments)-1]
}

// Name is the final segment's name.
func (id ID) Name() string { return id.Last().Name }

// implicit reports whether segment i is the subscription or resource-group level, which have
// no "/providers/{Namespace}" of their own.
func (id ID) implicit(i int) bool {
	s := id.Segments[i]
	return !s.Provider && s.Namespace == resourcesNamespace &&
		(i == 0 && s.Type == "subscriptions" || i == 1 && s.Type == "resourceGroups" && id.implicit(0))
}

// Subscription is the subscription id, or "".
func (id ID) Subscription() string {
	if len(id.Segments) > 0 && id.implicit(0) {
		return id.Segments[0].Name
	}
	return ""
}

// ResourceGroup is the resource group name, or "".
func (id ID) ResourceGroup() string {
	if len(id.Segments) > 1 && id.implicit(1) {
		return id.Segments[1].Name
	}
	return ""
}

// ResourceType is the full type of the final segment: its namespace and every type from the
// segment that started its provider group, e.g.
// "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials". The implicit
// levels are "Microsoft.Resources/subscriptions" and "Microsoft.Resources/resourceGroups".
func (id ID) ResourceType() string {
	if len(id.Segments) == 0 {
		return ""
	}
	start := len(id.Segments) - 1
	for start > 0 && !id.Segments[start].Provider && !id.implicit(start) {
		start--
	}
	types := make([]string, 0, len(id.Segments)-start)
	for _, s := range id.Segments[start:] {
		types = append(types, s.Type)
	}
	return id.Segments[start].Namespace + "/" + strings.Join(types, "/")
}

// Parent is the id without its final segment (for a collection: the scope that holds it).
func (id ID) Parent() ID {
	if len(id.Segments) == 0 {
		return id
	}
	return ID{Segments: id.Segments[:len(id.Segments)-1]}
}

// Scope is the id a provider group is attached to: for an extension resource such as a role
// assignment, the resource it extends; for a top-level provider resource, its resource group
// or subscription.
func (id ID) Scope() ID {
	for i := len(id.Segments) - 1; i >= 0; i-- {
		if id.Segments[i].Provider {
			return ID{Segments: id.Segments[:i]}
		}
	}
	return id.Parent()
}

// Child returns the id with one more segment of the same namespace.
func (id ID) Child(typ, name string) ID {
	ns := id.Last().Namespace
	segs := append(append([]Segment(nil), id.Segments...), Segment{Namespace: ns, Type: typ, Name: name})
	return ID{Segments: segs}
}

// Collection returns the id with its final name removed.
func (id ID) Collection() ID {
	if len(id.Segments) == 0 {
		return id
	}
	segs := append([]Segment(nil), id.Segments...)
	segs[len(segs)-1].Name = ""
	return ID{Segments: segs}
}

// WithProvider appends a provider group to a scope: {id}/providers/{ns}/{typ}/{name}.
func (id ID) WithProvider(ns, typ, name string) ID {
	segs := append(append([]Segment(nil), id.Segments...), Segment{Namespace: ns, Type: typ, Name: name, Provider: true})
	return ID{Segments: segs}
}

// String renders the id in ARM's canonical form; the root is "/".
func (id ID) String() string {
	if len(id.Segments) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, s := range id.Segments {
		if s.Provider {
			b.WriteString("/providers/")
			b.WriteString(s.Namespace)
		}
		b.WriteByte('/')
		b.WriteString(s.Type)
		if s.Name != "" {
			b.WriteByte('/')
			b.WriteString(s.Name)
		}
	}
	return b.String()
}

// Key is the id in lower case: ids are compared without regard to case.
func (id ID) Key() string { return strings.ToLower(id.String()) }

// Contains reports whether other is id itself or lies below it (id is a scope of other).
func (id ID) Contains(other ID) bool { return ScopeContains(id.Key(), other.Key()) }

// ScopeContains reports whether scope (an id's Key or String) covers target: equal, below it, or
// scope is the root.
func ScopeContains(scope, target string) bool {
	scope = strings.ToLower(strings.TrimSuffix(scope, "/"))
	target = strings.ToLower(strings.TrimSuffix(target, "/"))
	if scope == "" {
		return true
	}
	return target == scope || strings.HasPrefix(target, scope+"/")
}
