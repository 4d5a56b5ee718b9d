package arm

import (
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Two reads ARM answers outside the resource-id grammar: a resource group's resources
// (`az resource list -g`, armresources' ListByResourceGroup, `cerulean import`) and a
// provider's registration with its types' api-versions (what a client asks to learn a version).
var (
	groupResourcesPath = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/resourcegroups/([^/]+)/resources/?$`)
	providerPath       = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)/providers/([A-Za-z0-9.]+)/?$`)
)

// listing answers those two paths; ok is false for any other.
func (s *Service) listing(r *http.Request, c Caller) (res httpx.Response, ok bool, err error) {
	path := CleanPath(r.URL.Path)
	if m := groupResourcesPath.FindStringSubmatch(path); m != nil {
		res, err = s.groupResources(r, c, m[1], m[2])
		return res, true, err
	}
	if m := providerPath.FindStringSubmatch(path); m != nil {
		res, err = s.provider(r, m[1], m[2])
		return res, true, err
	}
	return res, false, nil
}

func (s *Service) listingPrecheck(r *http.Request, sub string) error {
	if r.Method != http.MethodGet {
		return Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The requested resource does not support http method '%s'.", clip(r.Method, 16))
	}
	if r.URL.Query().Get("api-version") == "" {
		return errMissingAPIVersion()
	}
	return s.checkSubscription(armid.ID{Segments: []armid.Segment{{Namespace: "Microsoft.Resources", Type: "subscriptions", Name: sub}}})
}

type listedResource struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Type      string            `json:"type"`
	Location  string            `json:"location,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
	ManagedBy string            `json:"managedBy,omitempty"`
}

// groupResources lists a group's top-level resources (not their children), as ARM does.
func (s *Service) groupResources(r *http.Request, c Caller, sub, group string) (httpx.Response, error) {
	if err := s.listingPrecheck(r, sub); err != nil {
		return httpx.Response{}, err
	}
	if _, err := s.checkAPIVersion(r, "Microsoft.Resources/resourceGroups"); err != nil {
		return httpx.Response{}, err
	}
	rg, err := armid.Parse("/subscriptions/" + sub + "/resourceGroups/" + group)
	if err != nil {
		return httpx.Response{}, Errorf(http.StatusBadRequest, "InvalidResourceId", "The resource group name is invalid.")
	}
	if err := s.Check(r.Context(), c, "Microsoft.Resources/subscriptions/resourceGroups/resources/read", rg.String()); err != nil {
		return httpx.Response{}, err
	}
	out := []listedResource{}
	err = s.Store().View(r.Context(), func(tx *store.Tx) error {
		if _, err := GetTx(tx, rg); err != nil {
			return ErrResourceGroupNotFound(group)
		}
		all, err := ListTx(tx, rg, "")
		for _, res := range all {
			id, perr := armid.Parse(res.ID)
			if perr != nil || len(id.Segments) != 3 || !id.Last().Provider || strings.EqualFold(id.Last().Namespace, "Microsoft.Authorization") {
				continue // children, and extension resources such as role assignments, are listed at their scope
			}
			out = append(out, listedResource{ID: res.ID, Name: res.Name, Type: res.Type, Location: res.Location, Tags: res.Tags, ManagedBy: res.ManagedBy})
		}
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].ID) < strings.ToLower(out[j].ID) })
	return httpx.Response{Body: map[string]any{"value": out}}, nil
}

// provider is a resource provider's registration: the types the cloud serves in that namespace
// and their api-versions. Any authenticated caller may read it, as in Azure.
func (s *Service) provider(r *http.Request, sub, namespace string) (httpx.Response, error) {
	if err := s.listingPrecheck(r, sub); err != nil {
		return httpx.Response{}, err
	}
	type resourceType struct {
		ResourceType string   `json:"resourceType"`
		Locations    []string `json:"locations"`
		APIVersions  []string `json:"apiVersions"`
	}
	var types []resourceType
	for _, t := range s.types {
		ns, typ, _ := strings.Cut(t.Name, "/")
		if strings.EqualFold(ns, namespace) {
			versions := slices.Clone(t.APIVersions)
			sort.Sort(sort.Reverse(sort.StringSlice(versions))) // newest first, as ARM lists them
			types = append(types, resourceType{ResourceType: typ, Locations: []string{}, APIVersions: versions})
		}
	}
	if len(types) == 0 {
		return httpx.Response{}, Errorf(http.StatusNotFound, "InvalidResourceNamespace", "The resource namespace '%s' is invalid.", clip(namespace, 128))
	}
	sort.Slice(types, func(i, j int) bool { return types[i].ResourceType < types[j].ResourceType })
	return httpx.Response{Body: map[string]any{
		"id": "/subscriptions/" + sub + "/providers/" + namespace, "namespace": namespace,
		"registrationState": "Registered", "resourceTypes": types,
	}}, nil
}
