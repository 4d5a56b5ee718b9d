package nodeagent

import (
	"net/url"
	"testing"
)

// The spellings of the token and instance routes, and case variants: each is either
// the route itself (answered or blocked by the agent) or refused as non-canonical; none is
// forwarded.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		raw   string
		want  route
		canon string
	}{
		{"/metadata/identity/oauth2/token", routeToken, "/metadata/identity/oauth2/token"},
		{"/metadata/identity/oauth2/token/", routeToken, "/metadata/identity/oauth2/token/"},
		{"/METADATA/IDENTITY/OAUTH2/TOKEN", routeToken, "/METADATA/IDENTITY/OAUTH2/TOKEN"},
		{"/Metadata/Identity/OAuth2/Token", routeToken, "/Metadata/Identity/OAuth2/Token"},
		{"//metadata/identity/oauth2/token", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity//oauth2/token", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity/oauth2/./token", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity/oauth2/x/../token", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity/oauth2/token//", routeNonCanonical, "/metadata/identity/oauth2/token/"},
		{"/metadata//instance", routeNonCanonical, "/metadata/instance"},
		{"/metadata/./instance/compute", routeNonCanonical, "/metadata/instance/compute"},
		{"/x/../metadata/instance", routeNonCanonical, "/metadata/instance"},
		{"/metadata/../x", routeNonCanonical, "/x"},
		{`/metadata\identity\oauth2\token`, routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity/oauth2/%74oken", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata%2Fidentity/oauth2/token", routeNonCanonical, "/metadata/identity/oauth2/token"},
		{"/metadata/identity%2F..%2Finstance", routeNonCanonical, "/metadata/instance"},
		{"/metadata/identity./oauth2/token", routeNonCanonical, "/metadata/identity./oauth2/token"},
		{"/metadata/identity;x/oauth2/token", routeNonCanonical, "/metadata/identity;x/oauth2/token"},
		{"/metadata/instance", routeInstance, "/metadata/instance"},
		{"/METADATA/INSTANCE/compute", routeInstance, "/METADATA/INSTANCE/compute"},
		{"/metadata/Instance/", routeInstance, "/metadata/Instance/"},
		{"/metadata/identity", routeIdentity, "/metadata/identity"},
		{"/metadata/identity/oauth2/token/x", routeIdentity, "/metadata/identity/oauth2/token/x"},
		{"/metadata/IDENTITY/info", routeIdentity, "/metadata/IDENTITY/info"},
		{"/metadata/instances", routeForward, "/metadata/instances"},
		{"/metadata/scheduledevents", routeForward, "/metadata/scheduledevents"},
		{"/host/token/", routeHostToken, "/host/token/"},
		{"/host//token", routeHostToken, "/host/token"},
		{"/other//path", routeForward, "/other/path"},
		{"/", routeForward, "/"},
	} {
		u, err := url.ParseRequestURI(c.raw) // as net/http parses a request's target
		if err != nil {
			t.Fatalf("%q: %v", c.raw, err)
		}
		got, canon := classify(u)
		if got != c.want || canon != c.canon {
			t.Errorf("classify(%q) = %v %q, want %v %q", c.raw, got, canon, c.want, c.canon)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"/metadata/identity/oauth2/token", "//metadata/instance", "/a/%2e%2e/metadata/identity"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.ParseRequestURI(raw)
		if err != nil {
			return
		}
		rt, canon := classify(u)
		// Whatever is forwarded is canonical and outside /metadata/identity and /metadata/instance.
		if rt == routeForward {
			again := &url.URL{Path: canon} // what withPath sends on (escaped by net/http)
			if r2, c2 := classify(again); c2 != canon || r2 == routeToken || r2 == routeInstance || r2 == routeIdentity || r2 == routeNonCanonical {
				t.Fatalf("%q forwarded as %q, which routes to %v %q", raw, canon, r2, c2)
			}
		}
	})
}
