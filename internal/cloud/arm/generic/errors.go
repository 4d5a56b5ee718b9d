package generic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// apiVersion is the form of an api-version: a date, and a suffix such as "-preview".
var apiVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-[A-Za-z0-9]+)?$`)

// versionError is ARM's answer to a version a resource provider's type does not accept: a
// malformed one is 400 InvalidApiVersionParameter; a well-formed one no registration of the
// type serves is 400 NoRegisteredProviderFound, naming the location ARM routed on (the
// resource group's) and the supported versions.
func (p *Provider) versionError(r *http.Request, version string, supported []string) error {
	if !apiVersion.MatchString(version) {
		return arm.Errorf(http.StatusBadRequest, "InvalidApiVersionParameter",
			"The api-version '%s' is invalid. The supported versions are '%s'.", clip(version, 32), strings.Join(supported, ","))
	}
	loc, typ := "global", ""
	if id, err := armid.Parse(arm.CleanPath(r.URL.Path)); err == nil {
		t := id.ResourceType()
		typ = t[strings.Index(t, "/")+1:]
		if id.ResourceGroup() != "" {
			_ = p.svc.Store().View(r.Context(), func(tx *store.Tx) error {
				if g, err := arm.GetTx(tx, arm.GroupID(id)); err == nil && g.Location != "" {
					loc = g.Location
				}
				return nil
			})
		}
	}
	return arm.Errorf(http.StatusBadRequest, "NoRegisteredProviderFound",
		"No registered resource provider found for location '%s' and API version '%s' for type '%s'. The supported api-versions are '%s'.",
		loc, version, clip(typ, 128), strings.Join(supported, ", "))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// mergeBody merges patch into cur as RFC 7396 does: objects merge member by member, null
// removes a member, any other value replaces.
func mergeBody(cur, patch map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range patch {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(out, k)
			continue
		}
		var pObj, cObj map[string]json.RawMessage
		if json.Unmarshal(v, &pObj) == nil && pObj != nil && json.Unmarshal(out[k], &cObj) == nil && cObj != nil {
			merged, err := mergeBody(cObj, pObj)
			if err != nil {
				return nil, err
			}
			b, err := json.Marshal(merged)
			if err != nil {
				return nil, err
			}
			out[k] = b
			continue
		}
		out[k] = v
	}
	return out, nil
}
