package webview

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

//go:embed assets/*
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"roleName": roleName,
	"prefix":   func() string { return Prefix },
	"services": func() []string { return []string{"entra", "arm", "keyvault", "msi", "storage"} },
}).ParseFS(assets, "assets/*.html"))

func (v *View) routes() {
	v.mux.HandleFunc("GET "+Prefix+"/{$}", v.resources)
	v.mux.HandleFunc("GET "+Prefix+"/identities", v.identities)
	v.mux.HandleFunc("GET "+Prefix+"/identity", v.identity)
	v.mux.HandleFunc("GET "+Prefix+"/access", v.access)
	v.mux.HandleFunc("GET "+Prefix+"/log", v.log)
	v.mux.HandleFunc("GET "+Prefix+"/log/rows", v.logRows)
	v.mux.Handle("GET "+Prefix+"/assets/", http.StripPrefix(Prefix, http.FileServerFS(assets)))
	v.mux.HandleFunc(Prefix+"/", http.NotFound)
}

// render writes a page, or a plain 500 naming no internals.
func (v *View) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		v.o.Logger.ErrorContext(r.Context(), "Rendering web view page failed", "page", name, "err", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (v *View) fail(w http.ResponseWriter, r *http.Request, err error) {
	v.o.Logger.ErrorContext(r.Context(), "Web view page failed", "path", r.URL.Path, "err", err)
	http.Error(w, "The page could not be built.", http.StatusInternalServerError)
}

// Node is one resource of the tree with its children and what its data plane holds.
type Node struct {
	ID, Name, Type string
	JSON           string
	State          []string
	Children       []*Node
}

// Tree builds subscription -> resource groups -> resources -> child resources, each with the
// JSON ARM's GET returns for it.
func (v *View) Tree(ctx context.Context) (*Node, error) {
	all, err := v.allResources(ctx)
	if err != nil {
		return nil, err
	}
	subID := "/subscriptions/" + v.o.SubscriptionID
	root := &Node{ID: subID, Name: v.o.SubscriptionID, Type: "Microsoft.Resources/subscriptions", JSON: v.json(ctx, subID)}
	byKey := map[string]*Node{strings.ToLower(subID): root}
	slices.SortFunc(all, func(a, b arm.Resource) int { return len(a.ID) - len(b.ID) }) // parents first
	for _, res := range all {
		n := &Node{ID: res.ID, Name: res.Name, Type: res.Type, JSON: v.json(ctx, res.ID), State: v.state(ctx, res)}
		byKey[strings.ToLower(res.ID)] = n
		parent := root
		if id, err := armid.Parse(res.ID); err == nil {
			for p := id.Parent(); !p.IsRoot(); p = p.Parent() {
				if found, ok := byKey[p.Key()]; ok {
					parent = found
					break
				}
			}
		}
		parent.Children = append(parent.Children, n)
	}
	// A managed identity's federated credentials are ARM children that Entra ID keeps.
	ps, err := v.o.Directory.Principals(ctx, v.o.TenantID)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	for _, p := range ps {
		n, ok := byKey[strings.ToLower(p.ResourceID)]
		if p.ResourceID == "" || !ok {
			continue
		}
		for _, f := range p.FederatedCredentials {
			id := p.ResourceID + "/federatedIdentityCredentials/" + f.Name
			n.Children = append(n.Children, &Node{ID: id, Name: f.Name, Type: "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials", JSON: v.json(ctx, id)})
		}
	}
	var sortTree func(n *Node)
	sortTree = func(n *Node) {
		slices.SortFunc(n.Children, func(a, b *Node) int { return strings.Compare(strings.ToLower(a.ID), strings.ToLower(b.ID)) })
		for _, c := range n.Children {
			sortTree(c)
		}
	}
	sortTree(root)
	return root, nil
}

// allResources is every resource ARM holds.
func (v *View) allResources(ctx context.Context) ([]arm.Resource, error) {
	var all []arm.Resource
	err := v.o.ARM.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		all, err = arm.ListTx(tx, armid.Root, "")
		return err
	})
	return all, err
}

// state is what the resource's data plane holds, or a line saying why it cannot be read.
func (v *View) state(ctx context.Context, res arm.Resource) []string {
	if v.o.DataPlanes == nil {
		return nil
	}
	lines, err := v.o.DataPlanes.State(ctx, res)
	if err != nil {
		return []string{"(its data plane does not answer: " + err.Error() + ")"}
	}
	return lines
}

// json is ARM's answer to a GET of id, or a note saying why there is none.
func (v *View) json(ctx context.Context, id string) string {
	b, err := v.o.ARM.Read(ctx, id, v.caller())
	if err != nil {
		return "(ARM does not answer a GET of this resource: " + err.Error() + ")"
	}
	return string(b)
}

func (v *View) resources(w http.ResponseWriter, r *http.Request) {
	root, err := v.Tree(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.render(w, r, "resources.html", map[string]any{"Title": "Resources", "Root": root})
}

// Identity is a principal with every role assignment that names it and, for a managed
// identity, the VMs and scale sets that carry it.
type Identity struct {
	entra.Principal
	Assignments []authz.Assignment
	AssignedTo  []string
}

// Identities are the directory's managed identities and app registrations, with their
// assignments; secret hashes and certificates stay out.
func (v *View) Identities(ctx context.Context) ([]Identity, error) {
	ps, err := v.o.Directory.Principals(ctx, v.o.TenantID)
	if err != nil {
		return nil, err
	}
	carriers, err := v.carriers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Identity, 0, len(ps))
	err = v.o.Authz.Store().View(ctx, func(tx *store.Tx) error {
		for _, p := range ps {
			as, err := authz.ListTx(tx, "/", authz.Filter{PrincipalID: p.ObjectID})
			if err != nil {
				return err
			}
			p.Secrets, p.Certificates = nil, nil
			out = append(out, Identity{Principal: p, Assignments: as, AssignedTo: carriers[strings.ToLower(p.ResourceID)]})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Identity) int { return strings.Compare(a.DisplayName, b.DisplayName) })
	return out, err
}

// computeTypes are the resources that carry user-assigned identities.
var computeTypes = []string{"Microsoft.Compute/virtualMachines", "Microsoft.Compute/virtualMachineScaleSets"}

// carriers maps each user-assigned identity (lower-case id) to the VMs and scale sets whose
// identity block names it, as ARM's GET shows them.
func (v *View) carriers(ctx context.Context) (map[string][]string, error) {
	all, err := v.allResources(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, res := range all {
		if !slices.ContainsFunc(computeTypes, func(t string) bool { return strings.EqualFold(t, res.Type) }) {
			continue
		}
		var body struct {
			Identity struct {
				UserAssignedIdentities map[string]json.RawMessage `json:"userAssignedIdentities"`
			} `json:"identity"`
		}
		if json.Unmarshal([]byte(v.json(ctx, res.ID)), &body) != nil {
			continue
		}
		for id := range body.Identity.UserAssignedIdentities {
			out[strings.ToLower(id)] = append(out[strings.ToLower(id)], res.ID)
		}
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out, nil
}

func (v *View) identities(w http.ResponseWriter, r *http.Request) {
	ids, err := v.Identities(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.render(w, r, "identities.html", map[string]any{"Title": "Identities", "Identities": ids})
}

func (v *View) identity(w http.ResponseWriter, r *http.Request) {
	ids, err := v.Identities(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	want := r.URL.Query().Get("clientId")
	for _, id := range ids {
		if strings.EqualFold(id.ClientID, want) {
			v.render(w, r, "identity.html", map[string]any{"Title": id.DisplayName, "Identity": id})
			return
		}
	}
	http.NotFound(w, r)
}

// Grant is one line of "check access": a role's permission pattern and the assignment that
// gives it.
type Grant struct {
	Pattern    string
	Data       bool
	Not        bool
	Role       string
	Assignment authz.Assignment
}

// Answer is "check access" for one principal at one scope, and for one action if asked.
type Answer struct {
	Principal, Scope, Action string
	Data                     bool
	Grants                   []Grant
	Asked                    bool
	Allowed                  bool
	By                       authz.Assignment // the assignment the authorizer found
	Denied                   string           // the authorizer's reason for a refusal
}

// CheckAccess answers with the authorizer's own functions: Effective for what applies at the
// scope, and Explain, which ARM and Key Vault decide with, for the action.
func (v *View) CheckAccess(ctx context.Context, principal, scope, action string, data bool) (Answer, error) {
	a := Answer{Principal: principal, Scope: scope, Action: action, Data: data}
	if principal == "" || scope == "" {
		return a, nil
	}
	as, err := v.o.Authz.Effective(ctx, principal, scope)
	if err != nil {
		return a, err
	}
	for _, as := range as {
		r, ok := authz.RoleByID(authz.RoleIDFromDefinitionID(as.RoleDefinitionID))
		if !ok {
			continue
		}
		for _, p := range r.Permissions {
			add := func(patterns []string, data, not bool) {
				for _, pat := range patterns {
					a.Grants = append(a.Grants, Grant{Pattern: pat, Data: data, Not: not, Role: r.RoleName, Assignment: as})
				}
			}
			add(p.Actions, false, false)
			add(p.NotActions, false, true)
			add(p.DataActions, true, false)
			add(p.NotDataActions, true, true)
		}
	}
	if action == "" {
		return a, nil
	}
	a.Asked = true
	a.By, err = v.o.Authz.Explain(ctx, principal, action, scope, data)
	switch {
	case err == nil:
		a.Allowed = true
	case errors.Is(err, authz.ErrDenied):
		a.Denied = v.o.Authz.DeniedReason(ctx, principal, action, scope)
	default:
		return a, err
	}
	return a, nil
}

func (v *View) access(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ans, err := v.CheckAccess(r.Context(), strings.TrimSpace(q.Get("principal")), strings.TrimSpace(q.Get("scope")),
		strings.TrimSpace(q.Get("action")), q.Get("data") == "on")
	if err != nil {
		v.fail(w, r, err)
		return
	}
	ids, err := v.Identities(r.Context())
	if err != nil {
		v.fail(w, r, err)
		return
	}
	v.render(w, r, "access.html", map[string]any{"Title": "Check access", "Answer": ans, "Identities": ids})
}

// logFilter reads the log page's filters: principal (object id or display name), status,
// service.
func (v *View) logFilter(r *http.Request, names map[string]entra.Principal) (reqlog.Filter, map[string]string) {
	q := r.URL.Query()
	f := reqlog.Filter{Service: q.Get("service")}
	form := map[string]string{"principal": q.Get("principal"), "status": q.Get("status"), "service": q.Get("service")}
	if p := strings.TrimSpace(q.Get("principal")); p != "" {
		f.Principal = p
		for oid, pr := range names {
			if strings.EqualFold(pr.DisplayName, p) || strings.EqualFold(pr.ClientID, p) {
				f.Principal = oid
			}
		}
	}
	if s, err := strconv.Atoi(q.Get("status")); err == nil {
		f.Status = s
	}
	if s, err := strconv.ParseUint(q.Get("since"), 10, 64); err == nil {
		f.Since = s
	}
	return f, form
}

// pageRows is how many entries the log page shows unless asked for all.
const pageRows = 1000

// Row is a log entry with its principal's name.
type Row struct {
	reqlog.Entry
	Name    string
	Refused bool
}

// rows reads the entries the request's filters select; a page shows the newest pageRows of
// them (unless ?limit=all), a live poll all.
func (v *View) rows(r *http.Request, live bool) ([]Row, map[string]string, error) {
	names, err := v.principalNames(r.Context())
	if err != nil {
		return nil, nil, err
	}
	f, form := v.logFilter(r, names)
	es, last := v.o.Requests.Read(f)
	form["last"] = strconv.FormatUint(last, 10)
	form["total"] = strconv.Itoa(len(es))
	// A table of 10,000 rows helps nobody. A live poll gets every new row, so an open page
	// keeps up whatever the rate; log.js keeps its table at pageRows.
	if !live && r.URL.Query().Get("limit") != "all" && len(es) > pageRows {
		es = es[len(es)-pageRows:]
	}
	form["shown"] = strconv.Itoa(len(es))
	out := make([]Row, len(es))
	for i, e := range es {
		out[i] = Row{Entry: e, Name: names[strings.ToLower(e.Principal)].DisplayName, Refused: e.Status >= 400}
	}
	return out, form, nil
}

func (v *View) log(w http.ResponseWriter, r *http.Request) {
	rows, form, err := v.rows(r, false)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	slices.Reverse(rows) // newest first
	maxRows := pageRows  // the live part keeps the table at this size
	if r.URL.Query().Get("limit") == "all" {
		maxRows = 0
	}
	v.render(w, r, "log.html", map[string]any{"Title": "Request log", "Rows": rows, "Form": form, "Last": form["last"], "Max": maxRows})
}

// logRows is the live log's poll: the rows after ?since=, newest first, as table rows.
func (v *View) logRows(w http.ResponseWriter, r *http.Request) {
	rows, form, err := v.rows(r, true)
	if err != nil {
		v.fail(w, r, err)
		return
	}
	slices.Reverse(rows)
	w.Header().Set("X-Last-Seq", form["last"])
	v.render(w, r, "rows", rows)
}

func roleName(defID string) string {
	if r, ok := authz.RoleByID(authz.RoleIDFromDefinitionID(defID)); ok {
		return r.RoleName
	}
	return defID
}
