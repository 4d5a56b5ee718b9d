package keyvault

import (
	"net/http"
	"strings"
)

// kind is the collection a request names.
type kind int

const (
	kindSecret kind = iota
	kindKey
	kindCert
)

// Key and certificate operations; the secrets ones are in route.go.
const (
	opKeyCreate op = iota + 100
	opKeyImport
	opKeyGet
	opKeyUpdate
	opKeyList
	opKeyVersions
	opKeyDelete
	opKeyGetDeleted
	opKeyListDeleted
	opKeyRecover
	opKeyPurge
	opKeyBackup
	opKeyRestore
	opKeyRotate
	opKeyGetPolicy
	opKeySetPolicy
	opKeySign
	opKeyVerify
	opKeyEncrypt
	opKeyDecrypt
	opKeyWrap
	opKeyUnwrap

	opCertCreate
	opCertImport
	opCertGet
	opCertUpdate
	opCertList
	opCertVersions
	opCertDelete
	opCertGetDeleted
	opCertListDeleted
	opCertRecover
	opCertPurge
	opCertBackup
	opCertRestore
	opCertGetPolicy
	opCertUpdatePolicy
	opCertGetPending
	opCertUpdatePending
	opCertDeletePending
	opCertMerge
)

func isList(o op) bool {
	switch o {
	case opList, opListVersions, opListDeleted, opKeyList, opKeyVersions, opKeyListDeleted,
		opCertList, opCertVersions, opCertListDeleted:
		return true
	}
	return false
}

// hasBody reports whether an operation reads a request body.
func hasBody(o op) bool {
	switch o {
	case opSet, opUpdate, opRestore, opKeyCreate, opKeyImport, opKeyUpdate, opKeyRestore, opKeySetPolicy,
		opKeySign, opKeyVerify, opKeyEncrypt, opKeyDecrypt, opKeyWrap, opKeyUnwrap,
		opCertCreate, opCertImport, opCertUpdate, opCertRestore, opCertUpdatePolicy, opCertUpdatePending, opCertMerge:
		return true
	}
	return false
}

// collection names a kind's paths.
type collection struct {
	live, deleted string
	k             kind
	// Operations by path shape: on the collection, on a name, on a name's keyword child, on a
	// version, on a version's keyword child (POST /keys/NAME/VERSION/sign), on a deleted item.
	list, listDeleted, restore op
	name                       map[string]op            // by method
	child                      map[string]map[string]op // by keyword, then method
	version                    map[string]op
	versionChild               map[string]op // POST only
	deletedName                map[string]op
	recover                    op
}

var keyPaths = collection{
	live: "keys", deleted: "deletedkeys", k: kindKey,
	list: opKeyList, listDeleted: opKeyListDeleted, restore: opKeyRestore, recover: opKeyRecover,
	name: map[string]op{http.MethodPut: opKeyImport, http.MethodGet: opKeyGet, http.MethodPatch: opKeyUpdate, http.MethodDelete: opKeyDelete},
	child: map[string]map[string]op{
		"create":         {http.MethodPost: opKeyCreate},
		"versions":       {http.MethodGet: opKeyVersions},
		"backup":         {http.MethodPost: opKeyBackup},
		"rotate":         {http.MethodPost: opKeyRotate},
		"rotationpolicy": {http.MethodGet: opKeyGetPolicy, http.MethodPut: opKeySetPolicy},
	},
	version: map[string]op{http.MethodGet: opKeyGet, http.MethodPatch: opKeyUpdate},
	versionChild: map[string]op{
		"sign": opKeySign, "verify": opKeyVerify, "encrypt": opKeyEncrypt, "decrypt": opKeyDecrypt,
		"wrapkey": opKeyWrap, "unwrapkey": opKeyUnwrap,
	},
	deletedName: map[string]op{http.MethodGet: opKeyGetDeleted, http.MethodDelete: opKeyPurge},
}

var certPaths = collection{
	live: "certificates", deleted: "deletedcertificates", k: kindCert,
	list: opCertList, listDeleted: opCertListDeleted, restore: opCertRestore, recover: opCertRecover,
	name: map[string]op{http.MethodGet: opCertGet, http.MethodPatch: opCertUpdate, http.MethodDelete: opCertDelete},
	child: map[string]map[string]op{
		"create":   {http.MethodPost: opCertCreate},
		"import":   {http.MethodPost: opCertImport},
		"versions": {http.MethodGet: opCertVersions},
		"backup":   {http.MethodPost: opCertBackup},
		"policy":   {http.MethodGet: opCertGetPolicy, http.MethodPatch: opCertUpdatePolicy},
		"pending":  {http.MethodGet: opCertGetPending, http.MethodPatch: opCertUpdatePending, http.MethodDelete: opCertDeletePending},
	},
	version:      map[string]op{http.MethodGet: opCertGet, http.MethodPatch: opCertUpdate},
	versionChild: map[string]op{},
	deletedName:  map[string]op{http.MethodGet: opCertGetDeleted, http.MethodDelete: opCertPurge},
}

// matchAny routes keys and certificates paths, and everything else to the secrets matcher.
func matchAny(method, path string) (route, error) {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	for _, c := range []collection{keyPaths, certPaths} {
		if strings.EqualFold(first, c.live) || strings.EqualFold(first, c.deleted) {
			return c.match(method, path)
		}
	}
	return match(method, path)
}

// match parses /COLL, /COLL/NAME[/KEYWORD], /COLL/NAME/VERSION[/OP], /COLL/NAME/pending/merge and
// the deleted forms. An empty or missing version ("/keys/NAME//sign", "/keys/NAME/sign") means
// the latest version.
func (c collection) match(method, path string) (route, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(parts) > 1 && parts[len(parts)-1] == "" { // a trailing slash: "/keys/NAME/" is the latest
		parts = parts[:len(parts)-1]
	}
	kw := func(i int, want string) bool { return i < len(parts) && strings.EqualFold(parts[i], want) }
	rt := route{kind: c.k}
	n := len(parts)
	deleted := strings.EqualFold(parts[0], c.deleted)
	pickM := func(m map[string]op) op { return m[method] }
	switch {
	case n == 1 && method == http.MethodGet:
		rt.op = c.list
		if deleted {
			rt.op = c.listDeleted
		}
	case n == 1:
	case deleted && n == 2:
		rt.name, rt.op = parts[1], pickM(c.deletedName)
	case deleted && n == 3 && kw(2, "recover") && method == http.MethodPost:
		rt.name, rt.op = parts[1], c.recover
	case deleted:
		return route{}, errNotFound()
	case n == 2 && kw(1, "restore") && method == http.MethodPost:
		rt.op = c.restore
	case n == 2:
		rt.name, rt.op = parts[1], pickM(c.name)
	case n == 3 && c.child[strings.ToLower(parts[2])] != nil:
		rt.name, rt.op = parts[1], pickM(c.child[strings.ToLower(parts[2])])
	case n == 3 && c.versionChild[strings.ToLower(parts[2])] != 0:
		// "/keys/NAME/sign": the SDK's path joining drops the empty version of the latest.
		if method == http.MethodPost {
			rt.op = c.versionChild[strings.ToLower(parts[2])]
		}
		rt.name = parts[1]
	case n == 3:
		rt.name, rt.version, rt.op = parts[1], parts[2], pickM(c.version)
	case n == 4 && c.k == kindCert && kw(2, "pending") && kw(3, "merge") && method == http.MethodPost:
		rt.name, rt.op = parts[1], opCertMerge
	case n == 4 && c.versionChild[strings.ToLower(parts[3])] != 0:
		if method == http.MethodPost {
			rt.op = c.versionChild[strings.ToLower(parts[3])]
		}
		rt.name, rt.version = parts[1], parts[2]
	default:
		return route{}, errNotFound()
	}
	if rt.op == 0 {
		return route{}, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed on this resource.", clip(method, 16))
	}
	if rt.op != c.list && rt.op != c.listDeleted && rt.op != c.restore && !secretName.MatchString(rt.name) {
		return route{}, errBadParameter("The request URI contains an invalid name: %s", clip(rt.name, maxNameLen))
	}
	if rt.version != "" {
		if !secretVersion.MatchString(rt.version) {
			return route{}, errBadParameter("The request URI contains an invalid version: %s", clip(rt.version, 64))
		}
		rt.version = strings.ToLower(rt.version)
	}
	return rt, nil
}
