package keyvault

import (
	"encoding/base64"
	"net/url"
	"strconv"
)

// attributesJSON is a secret's attributes on the wire: Unix seconds.
type attributesJSON struct {
	Enabled         bool   `json:"enabled"`
	NotBefore       *int64 `json:"nbf,omitempty"`
	Expires         *int64 `json:"exp,omitempty"`
	Created         int64  `json:"created"`
	Updated         int64  `json:"updated"`
	RecoverableDays int    `json:"recoverableDays,omitempty"`
	RecoveryLevel   string `json:"recoveryLevel"`
}

// bundleJSON is a SecretBundle, a SecretItem in lists, and, with the deletion fields, their
// deleted forms.
type bundleJSON struct {
	Value              *string           `json:"value,omitempty"`
	ContentType        string            `json:"contentType,omitempty"`
	ID                 string            `json:"id"`
	Kid                string            `json:"kid,omitempty"`
	Managed            bool              `json:"managed,omitempty"`
	Attributes         attributesJSON    `json:"attributes"`
	Tags               map[string]string `json:"tags,omitempty"`
	RecoveryID         string            `json:"recoveryId,omitempty"`
	DeletedDate        int64             `json:"deletedDate,omitempty"`
	ScheduledPurgeDate int64             `json:"scheduledPurgeDate,omitempty"`
}

type listJSON struct {
	Value    []bundleJSON `json:"value"`
	NextLink *string      `json:"nextLink"`
}

func attributes(v Vault, ver version) attributesJSON {
	a := attributesJSON{
		Enabled: ver.Enabled, NotBefore: ver.NotBefore, Expires: ver.Expires,
		Created: ver.Created, Updated: ver.Updated, RecoveryLevel: v.RecoveryLevel(),
	}
	if v.SoftDelete {
		a.RecoverableDays = v.RetentionDays
	}
	return a
}

// bundle is a version of a secret, with its value only where the operation returns it.
func bundle(v Vault, h head, ver version, withValue bool) bundleJSON {
	b := bundleJSON{
		ContentType: ver.ContentType, ID: v.URI() + "secrets/" + h.Name + "/" + ver.ID,
		Attributes: attributes(v, ver), Tags: ver.Tags,
	}
	if ver.Managed {
		b.Managed, b.Kid = true, keyID(v, h.Name, ver.ID)
	}
	if withValue {
		val := ver.Value
		b.Value = &val
	}
	return b
}

func deletedBundle(v Vault, h head, ver version) bundleJSON {
	b := bundle(v, h, ver, false)
	b.RecoveryID = v.URI() + "deletedsecrets/" + h.Name
	b.DeletedDate, b.ScheduledPurgeDate = h.Deleted, h.PurgeAt
	return b
}

// listNames is a page of GET /secrets or GET /deletedsecrets: one item per name, with the
// attributes of its latest version and an id without a version.
func listNames(sc secrets, rt route) (listJSON, error) {
	deleted := rt.op == opListDeleted
	after, err := decodeToken(rt.skipToken)
	if err != nil {
		return listJSON{}, err
	}
	heads, next, err := sc.page(deleted, after, rt.maxResults)
	if err != nil {
		return listJSON{}, err
	}
	out := listJSON{Value: []bundleJSON{}}
	for _, h := range heads {
		ver, err := sc.version(h, "")
		if err != nil {
			return listJSON{}, err
		}
		b := bundle(sc.vault, h, ver, false)
		if deleted {
			b = deletedBundle(sc.vault, h, ver)
		}
		b.ID = sc.vault.URI() + "secrets/" + h.Name
		out.Value = append(out.Value, b)
	}
	path := "secrets"
	if deleted {
		path = "deletedsecrets"
	}
	out.NextLink = nextLink(sc.vault, path, rt, next)
	return out, nil
}

// listVersions is a page of GET /secrets/{name}/versions; an unknown name has no versions.
func listVersions(sc secrets, rt route) (listJSON, error) {
	out := listJSON{Value: []bundleJSON{}}
	after, err := decodeToken(rt.skipToken)
	if err != nil {
		return out, err
	}
	offset := 0
	if after != "" {
		if offset, err = strconv.Atoi(after); err != nil || offset < 0 {
			return out, errBadParameter("The '$skiptoken' is invalid.")
		}
	}
	h, err := sc.active(rt.name)
	if err != nil {
		return out, nil //nolint:nilerr // an unknown or deleted name lists no versions
	}
	vs, err := sc.versions(h)
	if err != nil {
		return out, err
	}
	vs = sortedVersions(vs)
	if offset > len(vs) {
		offset = len(vs)
	}
	end := min(offset+rt.maxResults, len(vs))
	for _, ver := range vs[offset:end] {
		out.Value = append(out.Value, bundle(sc.vault, h, ver, false))
	}
	next := ""
	if end < len(vs) {
		next = strconv.Itoa(end)
	}
	out.NextLink = nextLink(sc.vault, "secrets/"+h.Name+"/versions", rt, next)
	return out, nil
}

// nextLink is the absolute URL of the next page, carrying the api-version (SDK pagers send the
// link as it is).
func nextLink(v Vault, path string, rt route, token string) *string {
	if token == "" {
		return nil
	}
	q := url.Values{"api-version": {rt.apiVersion}, "$skiptoken": {base64.RawURLEncoding.EncodeToString([]byte(token))},
		"maxresults": {strconv.Itoa(rt.maxResults)}}
	link := v.URI() + path + "?" + q.Encode()
	return &link
}

func decodeToken(t string) (string, error) {
	if t == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(t)
	if err != nil {
		return "", errBadParameter("The '$skiptoken' is invalid.")
	}
	return string(b), nil
}

func encodeBlob(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
