package armresource

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
)

// errToken is a resume token the reconciler will not follow.
var errToken = errors.New("resume token refused")

// operationSegments are the path segments under which ARM and its providers serve the state of
// long-running operations.
var operationSegments = map[string]bool{"operations": true, "operationstatuses": true, "operationresults": true, "asyncoperations": true}

// armEndpoint is the configured ARM endpoint.
func (r *Reconciler) armEndpoint() string {
	c := cloud.AzurePublic
	if r.opts.ARM != nil && len(r.opts.ARM.Cloud.Services) > 0 {
		c = r.opts.ARM.Cloud
	}
	return c.Services[cloud.ResourceManager].Endpoint
}

// checkToken accepts a poller resume token (an annotation, so anyone who may edit the object
// wrote it) only when every URL in it is on the ARM endpoint's scheme and host and is either
// the resource itself or an operation path of ARM or of the resource's provider in the
// resource's subscription (and resource group). Anything else would send the manager's bearer
// token, or read an answer into status, from where the annotation says.
func (r *Reconciler) checkToken(token, id, armType string) error {
	var t struct {
		Token map[string]any `json:"token"`
	}
	if err := json.Unmarshal([]byte(token), &t); err != nil || t.Token == nil {
		return fmt.Errorf("%w: not a resume token of the Azure SDK", errToken)
	}
	ep, err := url.Parse(r.armEndpoint())
	if err != nil {
		return fmt.Errorf("%w: the ARM endpoint: %w", errToken, err)
	}
	provider, _, _ := strings.Cut(armType, "/")
	urls := 0
	for k, v := range t.Token {
		s, ok := v.(string)
		if !ok || s == "" || (!strings.HasSuffix(strings.ToLower(k), "url") && !strings.Contains(s, "://")) {
			continue
		}
		urls++
		if err := checkPollURL(s, ep, id, provider); err != nil {
			return fmt.Errorf("%w: %s: %w", errToken, k, err)
		}
	}
	if urls == 0 {
		return fmt.Errorf("%w: it names no operation URL", errToken)
	}
	return nil
}

// checkPollURL is one URL of a resume token; see checkToken.
func checkPollURL(raw string, ep *url.URL, id, provider string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if !strings.EqualFold(u.Scheme, ep.Scheme) || !strings.EqualFold(u.Host, ep.Host) {
		return fmt.Errorf("%s://%s is not the ARM endpoint %s://%s", u.Scheme, u.Host, ep.Scheme, ep.Host)
	}
	if u.User != nil || u.Opaque != "" || u.Fragment != "" || u.RawPath != "" || path.Clean("/"+u.Path) != u.Path {
		return fmt.Errorf("path %q is not a plain ARM path", u.EscapedPath())
	}
	p, ok := strings.CutPrefix(u.Path, strings.TrimSuffix(ep.Path, "/"))
	if !ok {
		return fmt.Errorf("path %q is outside the ARM endpoint", u.Path)
	}
	if sameID(p, id) || operationPath(p, id, provider) {
		return nil
	}
	return fmt.Errorf("path %q is neither the resource nor an operation of %s in its subscription", p, provider)
}

// operationPath reports whether p is /subscriptions/{sub}[/resourceGroups/{rg}]
// [/providers/{ns}[/locations/{loc}]]/{operations segment}/{id}, with sub and rg those of the
// resource and ns its provider or Microsoft.Resources.
func operationPath(p, id, provider string) bool {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	idSegs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) < 4 || len(idSegs) < 2 || !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[1], idSegs[1]) {
		return false
	}
	i := 2
	if strings.EqualFold(segs[i], "resourceGroups") {
		if len(idSegs) < 4 || !strings.EqualFold(idSegs[2], "resourceGroups") || !strings.EqualFold(segs[i+1], idSegs[3]) {
			return false
		}
		i += 2
	}
	if i+1 < len(segs) && strings.EqualFold(segs[i], "providers") {
		if ns := segs[i+1]; !strings.EqualFold(ns, provider) && !strings.EqualFold(ns, "Microsoft.Resources") {
			return false
		}
		i += 2
		if i+1 < len(segs) && strings.EqualFold(segs[i], "locations") {
			i += 2
		}
	}
	return i+2 == len(segs) && operationSegments[strings.ToLower(segs[i])] && segs[i+1] != ""
}
