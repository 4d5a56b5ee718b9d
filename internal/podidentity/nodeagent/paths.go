package nodeagent

import (
	"net/url"
	"path"
	"strings"
)

// route is what the agent does with a request path, decided on its canonical form.
type route int

const (
	// routeForward proxies the canonical path to the node's IMDS.
	routeForward route = iota
	// routeToken is /metadata/identity/oauth2/token: the agent answers it.
	routeToken
	// routeHostToken is /host/token/, for host-network callers.
	routeHostToken
	// routeInstance is /metadata/instance...: blocked for pods (it names the node's identities).
	routeInstance
	// routeIdentity is any other path under /metadata/identity: never forwarded for a pod.
	routeIdentity
	// routeNonCanonical is a path under /metadata/ that is not in canonical form: refused
	// with 400, because a server behind us might normalise it into a route we block.
	routeNonCanonical
)

// classify canonicalises a request's path and routes it. Routing compares segments
// case-insensitively: IMDS's own matching is not documented as case-sensitive, so
// /METADATA/Identity/... must be the token route here, not something forwarded. A path is
// canonical when its escaped form is exactly its cleaned form (no empty, "." or ".." segments,
// no backslashes, no percent-escapes); under /metadata/ every segment must further be plain
// [A-Za-z0-9_-] (IMDS's routes need nothing else), so no encoding trick (trailing dots, ';'
// parameters, NUL) can reach a server that would read it differently. The canonical path is
// returned for forwarding.
func classify(u *url.URL) (route, string) {
	raw := u.EscapedPath()
	decoded := u.Path
	if decoded == "" {
		decoded = "/"
	}
	canon := canonical(decoded)
	metadata := underMetadata(canon) || underMetadata(strings.ReplaceAll(decoded, `\`, "/"))
	if metadata && (raw != canon || !plainSegments(canon)) {
		return routeNonCanonical, canon
	}
	segs := strings.Split(strings.ToLower(strings.Trim(canon, "/")), "/")
	if canon == "/host/token" || canon == "/host/token/" {
		return routeHostToken, canon
	}
	switch {
	case !metadata || len(segs) < 2:
		return routeForward, canon
	case segs[1] == "instance":
		return routeInstance, canon
	case segs[1] == "identity":
		if len(segs) == 4 && segs[2] == "oauth2" && segs[3] == "token" {
			return routeToken, canon
		}
		return routeIdentity, canon
	}
	return routeForward, canon
}

// canonical cleans p (backslashes read as slashes, as some servers do), keeping one trailing
// slash when p had one.
func canonical(p string) string {
	p = strings.ReplaceAll(p, `\`, "/")
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

func underMetadata(p string) bool {
	l := strings.ToLower(strings.TrimLeft(p, "/"))
	return l == "metadata" || strings.HasPrefix(l, "metadata/")
}

// plainSegments reports whether every segment of p is [A-Za-z0-9_-]+ (a trailing slash allowed).
func plainSegments(p string) bool {
	for _, s := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/"), "/") {
		if s == "" {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				return false
			}
		}
	}
	return true
}
