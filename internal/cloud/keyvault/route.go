package keyvault

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// op is a secrets operation of the data plane.
type op int

const (
	opSet op = iota + 1
	opGet
	opUpdate
	opList
	opListVersions
	opDelete
	opGetDeleted
	opListDeleted
	opRecover
	opPurge
	opBackup
	opRestore
)

// route is a parsed data-plane request line.
type route struct {
	kind       kind // what the path names: secrets (zero), keys or certificates
	op         op
	name       string // the secret name as sent; "" for collection operations
	version    string // lower-case hex; "" for the latest
	apiVersion string
	maxResults int    // list page size
	skipToken  string // list continuation, opaque
}

// Bounds of names and pages, as Key Vault's.
const (
	maxNameLen     = 127
	defaultPage    = 25
	maxPage        = 25
	maxQueryLength = 4096
)

var (
	secretName    = regexp.MustCompile(`^[0-9a-zA-Z-]{1,127}$`)
	secretVersion = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)
	// API versions 7.0 and later (with optional preview suffixes) and the date-style versions
	// that followed 7.6.
	numericVersion = regexp.MustCompile(`^7\.[0-9]{1,2}(-preview(\.[0-9]{1,2})?)?$`)
	dateVersion    = regexp.MustCompile(`^(20[2-9][0-9])-[01][0-9]-[0-3][0-9](-preview)?$`)
)

// parseRoute maps a method, path and raw query to an operation. It is pure (no I/O) and bounded,
// so it can be fuzzed; everything it returns has been validated.
func parseRoute(method, path, rawQuery string) (route, error) {
	if len(path) > 1024 || len(rawQuery) > maxQueryLength {
		return route{}, errBadParameter("The request URI is too long.")
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return route{}, errBadParameter("The request URI contains an invalid query.")
	}
	rt, err := matchAny(method, path)
	if err != nil {
		return route{}, err
	}
	if rt.apiVersion, err = checkAPIVersion(q.Get("api-version")); err != nil {
		return route{}, err
	}
	if isList(rt.op) {
		rt.maxResults = defaultPage
		if m := q.Get("maxresults"); m != "" {
			n, err := strconv.Atoi(m)
			if err != nil || n < 1 || n > maxPage {
				return route{}, errBadParameter("The value of 'maxresults' must be between 1 and %d.", maxPage)
			}
			rt.maxResults = n
		}
		rt.skipToken = q.Get("$skiptoken")
		if len(rt.skipToken) > 512 {
			return route{}, errBadParameter("The '$skiptoken' is invalid.")
		}
	}
	return rt, nil
}

func checkAPIVersion(v string) (string, error) {
	switch {
	case v == "":
		return "", errBadParameter("The api-version query parameter is missing.")
	case numericVersion.MatchString(v):
		return v, nil
	case dateVersion.MatchString(v) && v >= "2025-01-01":
		return v, nil
	}
	return "", errBadParameter("The specified version (%s) is not recognized. Consider using the latest supported version (%s).", clip(v, 32), latestAPIVersion)
}

// match recognises the secrets paths. Keywords are matched without regard to case; an empty
// version ("/secrets/NAME/") means the latest one, as azsecrets sends it.
func match(method, path string) (route, error) {
	if !strings.HasPrefix(path, "/") {
		return route{}, errNotFound()
	}
	parts := strings.Split(path[1:], "/")
	kw := func(i int, want string) bool { return i < len(parts) && strings.EqualFold(parts[i], want) }
	n := len(parts)
	if n > 0 && parts[n-1] == "" && n != 3 { // "/secrets/" and "/secrets/NAME/x/" fold to no slash
		n--
		parts = parts[:n]
	}
	var rt route
	switch {
	case kw(0, "secrets") && n == 1:
		rt.op = pick(method, map[string]op{http.MethodGet: opList})
	case kw(0, "secrets") && n == 2 && kw(1, "restore") && method == http.MethodPost:
		rt.op = opRestore
	case kw(0, "secrets") && n == 2:
		rt.name = parts[1]
		rt.op = pick(method, map[string]op{http.MethodPut: opSet, http.MethodGet: opGet, http.MethodPatch: opUpdate, http.MethodDelete: opDelete})
	case kw(0, "secrets") && n == 3 && kw(2, "versions"):
		rt.name = parts[1]
		rt.op = pick(method, map[string]op{http.MethodGet: opListVersions})
	case kw(0, "secrets") && n == 3 && kw(2, "backup"):
		rt.name = parts[1]
		rt.op = pick(method, map[string]op{http.MethodPost: opBackup})
	case kw(0, "secrets") && n == 3:
		rt.name, rt.version = parts[1], parts[2]
		rt.op = pick(method, map[string]op{http.MethodGet: opGet, http.MethodPatch: opUpdate})
	case kw(0, "deletedsecrets") && n == 1:
		rt.op = pick(method, map[string]op{http.MethodGet: opListDeleted})
	case kw(0, "deletedsecrets") && n == 2:
		rt.name = parts[1]
		rt.op = pick(method, map[string]op{http.MethodGet: opGetDeleted, http.MethodDelete: opPurge})
	case kw(0, "deletedsecrets") && n == 3 && kw(2, "recover"):
		rt.name = parts[1]
		rt.op = pick(method, map[string]op{http.MethodPost: opRecover})
	default:
		return route{}, errNotFound()
	}
	if rt.op == 0 {
		return route{}, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed on this resource.", clip(method, 16))
	}
	if rt.op != opList && rt.op != opListDeleted && rt.op != opRestore {
		if !secretName.MatchString(rt.name) {
			return route{}, errBadParameter("The request URI contains an invalid name: %s", clip(rt.name, maxNameLen))
		}
	}
	if rt.version != "" {
		if !secretVersion.MatchString(rt.version) {
			return route{}, errBadParameter("The request URI contains an invalid version: %s", clip(rt.version, 64))
		}
		rt.version = strings.ToLower(rt.version)
	}
	return rt, nil
}

func pick(method string, ops map[string]op) op { return ops[method] }

func errNotFound() *Error {
	return errorf(http.StatusNotFound, "NotFound", "The requested URI does not represent any resource on the server.")
}
