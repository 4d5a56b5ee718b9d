// Package importer is `cerulean import`, the job of Azure Service Operator's `asoctl import
// azure-resource`: it reads Azure resources and their children from ARM and writes the
// manifests that adopt them: Cerulean's typed kinds where it has one (at the served storage
// version, the spec being what the reconciler would send back to ARM), the generic kind
// `cerulean.dev/v1alpha1` AzureResource otherwise. Owners are linked by name, read-only fields
// are dropped and secrets are never written: ARM does not return them, and a secret input (a
// server's administrator password) becomes a comment, or a reference to a Secret the user
// creates. Nothing is written until every resource was read.
package importer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cerulean/cerulean/internal/controller/armresource"
)

// Options say what to import and how to write it.
type Options struct {
	// IDs are the ARM ids to import, each with its children (a resource group: everything in it).
	IDs []string
	// Namespace is the manifests' metadata.namespace; empty leaves it out (kubectl's -n decides).
	Namespace string
	// ReconcilePolicy is the serviceoperator.azure.com/reconcile-policy annotation: manage, skip
	// or detach-on-delete; empty writes none (the manager's default, manage), as asoctl does.
	ReconcilePolicy string
	// SecretReferences writes each secret input as a reference to a Secret the user creates
	// (the manager then sets the value in Azure from it); without it the input is left out of
	// the spec, and a comment says how to add it.
	SecretReferences bool
	// APIVersions are api-versions by ARM type (case-insensitive) for types without a typed
	// kind; a type not listed gets its provider's newest stable version.
	APIVersions map[string]string
}

// ErrInvalidID reports an argument that is not an ARM resource id.
var ErrInvalidID = errors.New("not an ARM resource id")

// resource is one resource read from ARM.
type resource struct {
	id         *arm.ResourceID
	armType    string
	apiVersion string
	kind       *armresource.Kind // nil: the generic kind
	body       map[string]any
	name       string // its Kubernetes name
}

// Import reads every id and its children and returns their manifests, owners first. An error
// names the id it is about; nothing is returned with it.
func Import(ctx context.Context, r armReader, o Options) ([]Manifest, error) {
	if err := checkPolicy(o.ReconcilePolicy); err != nil {
		return nil, err
	}
	ids := make([]*arm.ResourceID, 0, len(o.IDs))
	for _, s := range o.IDs {
		id, err := parseID(s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	w := &walker{r: r, o: o, seen: map[string]*resource{}}
	for _, id := range ids {
		if err := w.visit(ctx, id, id.String()); err != nil {
			return nil, err
		}
	}
	nameResources(w.order, w.seen)
	out := make([]Manifest, 0, len(w.order))
	for _, res := range w.order {
		m, err := manifestOf(res, w.seen, o)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", res.id, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func checkPolicy(p string) error {
	switch p {
	case "", armresource.PolicyManage, armresource.PolicySkip, armresource.PolicyDetachOnDelete:
		return nil
	}
	return fmt.Errorf("reconcile policy %q: want manage, skip or detach-on-delete", p)
}

// parseID accepts a resource id (a resource group or a resource below one, or an extension
// resource), not a subscription, a collection or a provider.
func parseID(s string) (*arm.ResourceID, error) {
	id, err := arm.ParseResourceID(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("import %q: %w: %w", s, ErrInvalidID, err)
	}
	if id.SubscriptionID == "" || id.ResourceType.String() == "Microsoft.Resources/subscriptions" ||
		id.ResourceType.String() == "Microsoft.Resources/tenants" || id.Name == "" {
		return nil, fmt.Errorf("import %q: %w: name a resource group or a resource (/subscriptions/SUB/resourceGroups/RG[/providers/...])", s, ErrInvalidID)
	}
	return id, nil
}

// walker reads resources depth first, owners before their children.
type walker struct {
	r     armReader
	o     Options
	seen  map[string]*resource // by lower-case id
	order []*resource
}

func (w *walker) visit(ctx context.Context, id *arm.ResourceID, root string) error {
	key := strings.ToLower(id.String())
	if _, ok := w.seen[key]; ok {
		return nil
	}
	res := &resource{id: id, armType: id.ResourceType.String(), kind: kindOf(id.ResourceType.String())}
	if res.kind != nil {
		res.apiVersion = res.kind.APIVersion
	} else {
		v, err := w.version(ctx, id)
		if err != nil {
			return readError(root, id.String(), err)
		}
		res.apiVersion = v
	}
	body, err := w.r.get(ctx, id.String(), res.apiVersion)
	if err != nil {
		return readError(root, id.String(), err)
	}
	res.body = body
	w.seen[key] = res
	w.order = append(w.order, res)
	if err := w.children(ctx, res, root); err != nil {
		return err
	}
	return w.roleAssignments(ctx, res, root)
}

// roleAssignments visits the role assignments made at res itself (not inherited ones): ARM
// lists them at their scope, not among a group's resources.
func (w *walker) roleAssignments(ctx context.Context, res *resource, root string) error {
	if strings.EqualFold(res.armType, roleAssignmentType) {
		return nil
	}
	ra := kindOf(roleAssignmentType)
	path := res.id.String() + "/providers/" + roleAssignmentType
	items, err := w.r.list(ctx, path, ra.APIVersion, "atScope()")
	if err != nil {
		return readError(root, path, err)
	}
	for _, item := range items {
		props, _ := item["properties"].(map[string]any)
		scope, _ := props["scope"].(string)
		s, _ := item["id"].(string)
		if !strings.EqualFold(strings.TrimSuffix(scope, "/"), res.id.String()) {
			continue // inherited from a scope above
		}
		id, err := arm.ParseResourceID(s)
		if err != nil {
			return fmt.Errorf("import %s: ARM listed %q, %w: %w", root, s, ErrInvalidID, err)
		}
		if err := w.visit(ctx, id, root); err != nil {
			return err
		}
	}
	return nil
}

const roleAssignmentType = "Microsoft.Authorization/roleAssignments"

// version is the api-version of a type without a typed kind: given, or its provider's newest.
func (w *walker) version(ctx context.Context, id *arm.ResourceID) (string, error) {
	typ := id.ResourceType.String()
	v, err := w.versionOf(ctx, id.SubscriptionID, typ)
	if err != nil {
		return "", fmt.Errorf("find an api-version of %s (give one with --api-version %s=VERSION): %w", typ, typ, err)
	}
	return v, nil
}

func (w *walker) versionOf(ctx context.Context, subscription, armType string) (string, error) {
	for t, v := range w.o.APIVersions {
		if strings.EqualFold(t, armType) {
			return v, nil
		}
	}
	ns, typ, _ := strings.Cut(armType, "/")
	types, err := w.r.resourceTypes(ctx, subscription, ns)
	if err != nil {
		return "", err
	}
	for t, versions := range types {
		if strings.EqualFold(t, typ) {
			if v := newestStable(versions); v != "" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("%w: provider %s lists no stable api-version of %s", errNoVersion, ns, armType)
}

// children visits what belongs to res: a resource group's resources; a typed kind's children
// of the typed child kinds (a vault's secrets are data, not ARM resources, and are not read); a
// generic resource's children of its provider's child types.
func (w *walker) children(ctx context.Context, res *resource, root string) error {
	if strings.EqualFold(res.armType, "Microsoft.Resources/resourceGroups") {
		list, err := w.r.groupResources(ctx, res.id.SubscriptionID, res.id.Name)
		if err != nil {
			return readError(root, res.id.String()+"/resources", err)
		}
		for _, l := range list {
			id, err := arm.ParseResourceID(l.ID)
			if err != nil {
				return fmt.Errorf("import %s: ARM listed %q, %w: %w", root, l.ID, ErrInvalidID, err)
			}
			if err := w.visit(ctx, id, root); err != nil {
				return err
			}
		}
		return nil
	}
	if res.kind == nil {
		return w.genericChildren(ctx, res, root)
	}
	for _, ck := range childKinds(res.kind.GVK.GroupKind()) {
		path := res.id.String() + "/" + ck.ChildSegment
		items, err := w.r.list(ctx, path, ck.APIVersion, "")
		if err != nil {
			if statusOf(err) == http.StatusNotFound || statusOf(err) == http.StatusMethodNotAllowed {
				continue // the parent's SKU or version has none of these
			}
			return readError(root, path, err)
		}
		if err := w.visitListed(ctx, slices.DeleteFunc(items, func(item map[string]any) bool { return !wanted(ck, item) }), root); err != nil {
			return err
		}
	}
	return nil
}

// genericChildren visits the children of a resource without a typed kind. ARM's group listing
// has only top-level resources, so they are found through the provider's registration: every
// type it registers one segment below res's ("namespaces/queues" under "namespaces") is listed
// at res's id. A type res cannot have (ARM answers 400, 404 or 405) or one with no stable
// api-version (none given) is passed over.
func (w *walker) genericChildren(ctx context.Context, res *resource, root string) error {
	ns, typ, _ := strings.Cut(res.armType, "/")
	types, err := w.r.resourceTypes(ctx, res.id.SubscriptionID, ns)
	if err != nil {
		return readError(root, "/subscriptions/"+res.id.SubscriptionID+"/providers/"+ns, err)
	}
	var segments []string
	for t := range types {
		if len(t) > len(typ)+1 && strings.EqualFold(t[:len(typ)+1], typ+"/") && !strings.Contains(t[len(typ)+1:], "/") {
			segments = append(segments, t[len(typ)+1:])
		}
	}
	slices.Sort(segments)
	for _, seg := range segments {
		v, err := w.versionOf(ctx, res.id.SubscriptionID, res.armType+"/"+seg)
		if errors.Is(err, errNoVersion) {
			continue
		}
		if err != nil {
			return readError(root, res.id.String()+"/"+seg, err)
		}
		path := res.id.String() + "/" + seg
		items, err := w.r.list(ctx, path, v, "")
		switch statusOf(err) {
		case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed:
			continue
		}
		if err != nil {
			return readError(root, path, err)
		}
		if err := w.visitListed(ctx, items, root); err != nil {
			return err
		}
	}
	return nil
}

// visitListed visits each resource of a collection ARM listed.
func (w *walker) visitListed(ctx context.Context, items []map[string]any, root string) error {
	for _, item := range items {
		s, _ := item["id"].(string)
		id, err := arm.ParseResourceID(s)
		if err != nil {
			return fmt.Errorf("import %s: ARM listed %q, %w: %w", root, s, ErrInvalidID, err)
		}
		if err := w.visit(ctx, id, root); err != nil {
			return err
		}
	}
	return nil
}

// wanted filters a listed child: of a server's parameters only those set by someone (Azure
// lists every parameter, at its default, for every server).
func wanted(k armresource.Kind, item map[string]any) bool {
	if k.GVK.Kind != "FlexibleServersConfiguration" {
		return true
	}
	props, _ := item["properties"].(map[string]any)
	src, _ := props["source"].(string)
	return !strings.EqualFold(src, "system-default")
}

// kindOf is the typed kind of an ARM type, nil when Cerulean has none.
func kindOf(armType string) *armresource.Kind {
	for _, k := range armresource.Kinds() {
		if strings.EqualFold(k.ARMType, armType) {
			return &k
		}
	}
	return nil
}

// childKinds are the typed kinds owned by an object of gk through an ARM child path.
func childKinds(gk schema.GroupKind) []armresource.Kind {
	var out []armresource.Kind
	for _, k := range armresource.Kinds() {
		if k.Owner == armresource.OwnerChild && len(k.OwnerKinds) > 0 && k.OwnerKinds[0] == gk {
			out = append(out, k)
		}
	}
	return out
}

// readError says which id (of which argument) could not be read, and why, in a user's terms.
func readError(root, id string, err error) error {
	prefix := "import " + root
	if !strings.EqualFold(root, id) {
		prefix += ": read " + id
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	switch re.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%s: not found in Azure (%s)", prefix, re.ErrorCode)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%s: the credential may not read it (%d %s): grant it a reader role there", prefix, re.StatusCode, re.ErrorCode)
	}
	return fmt.Errorf("%s: ARM answered %d %s", prefix, re.StatusCode, re.ErrorCode)
}

func statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func subscriptionOf(id string) string {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) >= 2 && strings.EqualFold(parts[0], "subscriptions") {
		return parts[1]
	}
	return ""
}
