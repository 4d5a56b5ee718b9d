package keyvault

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// b64 is a byte string in base64url, the JWK encoding; padded and standard forms are accepted
// on input too, as the SDKs differ.
type b64 []byte

func (b b64) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.RawURLEncoding.EncodeToString(b))
}

func (b *b64) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	s = strings.NewReplacer("+", "-", "/", "_").Replace(trimPadding(s))
	out, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return errBadParameter("A property is not valid base64url.")
	}
	*b = out
	return nil
}

// jwkJSON is a key's public JSON Web Key as Key Vault returns it.
type jwkJSON struct {
	Kid    string   `json:"kid"`
	Kty    string   `json:"kty"`
	KeyOps []string `json:"key_ops"`
	N      b64      `json:"n,omitempty"`
	E      b64      `json:"e,omitempty"`
	Crv    string   `json:"crv,omitempty"`
	X      b64      `json:"x,omitempty"`
	Y      b64      `json:"y,omitempty"`
}

// jwkIn is a JSON Web Key to import, with its private members.
type jwkIn struct {
	Kty    string   `json:"kty"`
	KeyOps []string `json:"key_ops"`
	N      b64      `json:"n"`
	E      b64      `json:"e"`
	D      b64      `json:"d"`
	P      b64      `json:"p"`
	Q      b64      `json:"q"`
	Crv    string   `json:"crv"`
	X      b64      `json:"x"`
	Y      b64      `json:"y"`
}

// keyBundleJSON is a KeyBundle, a KeyItem in lists (without key), and their deleted forms.
type keyBundleJSON struct {
	Key                *jwkJSON          `json:"key,omitempty"`
	Kid                string            `json:"kid,omitempty"` // items only
	Attributes         keyAttributesJSON `json:"attributes"`
	Tags               map[string]string `json:"tags,omitempty"`
	Managed            bool              `json:"managed,omitempty"`
	RecoveryID         string            `json:"recoveryId,omitempty"`
	DeletedDate        int64             `json:"deletedDate,omitempty"`
	ScheduledPurgeDate int64             `json:"scheduledPurgeDate,omitempty"`
}

type keyAttributesJSON struct {
	attributesJSON
	Exportable bool `json:"exportable"`
}

type keyListJSON struct {
	Value    []keyBundleJSON `json:"value"`
	NextLink *string         `json:"nextLink"`
}

func keyID(v Vault, name, version string) string {
	id := v.URI() + "keys/" + name
	if version != "" {
		id += "/" + version
	}
	return id
}

// publicJWK is the public half of a version.
func publicJWK(v Vault, h head, k keyVersion) (*jwkJSON, error) {
	s, err := k.signer()
	if err != nil {
		return nil, err
	}
	j := &jwkJSON{Kid: keyID(v, h.Name, k.ID), Kty: k.Kty, KeyOps: k.Ops}
	switch p := s.Public().(type) {
	case *rsa.PublicKey:
		j.N, j.E = p.N.Bytes(), big.NewInt(int64(p.E)).Bytes()
	case *ecdsa.PublicKey:
		raw, err := p.Bytes()
		if err != nil {
			return nil, err
		}
		size := (len(raw) - 1) / 2
		j.Crv, j.X, j.Y = p.Curve.Params().Name, raw[1:1+size], raw[1+size:]
	}
	return j, nil
}

func keyAttributes(v Vault, k keyVersion) keyAttributesJSON {
	a := attributesJSON{
		Enabled: k.Enabled, NotBefore: k.NotBefore, Expires: k.Expires,
		Created: k.Created, Updated: k.Updated, RecoveryLevel: v.RecoveryLevel(),
	}
	if v.SoftDelete {
		a.RecoverableDays = v.RetentionDays
	}
	return keyAttributesJSON{attributesJSON: a}
}

func keyBundle(v Vault, h head, k keyVersion) (keyBundleJSON, error) {
	j, err := publicJWK(v, h, k)
	if err != nil {
		return keyBundleJSON{}, err
	}
	return keyBundleJSON{Key: j, Attributes: keyAttributes(v, k), Tags: k.Tags, Managed: k.Managed}, nil
}

func deletedKeyBundle(v Vault, h head, k keyVersion) (keyBundleJSON, error) {
	b, err := keyBundle(v, h, k)
	b.RecoveryID = v.URI() + "deletedkeys/" + h.Name
	b.DeletedDate, b.ScheduledPurgeDate = h.Deleted, h.PurgeAt
	return b, err
}

func keyItem(v Vault, h head, k keyVersion, withVersion bool) keyBundleJSON {
	id := keyID(v, h.Name, "")
	if withVersion {
		id = keyID(v, h.Name, k.ID)
	}
	return keyBundleJSON{Kid: id, Attributes: keyAttributes(v, k), Tags: k.Tags, Managed: k.Managed}
}

// listKeys is a page of GET /keys or /deletedkeys.
func listKeys(ks objects[keyVersion], rt route) (keyListJSON, error) {
	deleted := rt.op == opKeyListDeleted
	out := keyListJSON{Value: []keyBundleJSON{}}
	after, err := decodeToken(rt.skipToken)
	if err != nil {
		return out, err
	}
	heads, next, err := ks.page(deleted, after, rt.maxResults)
	if err != nil {
		return out, err
	}
	for _, h := range heads {
		k, err := ks.version(h, "")
		if err != nil {
			return out, err
		}
		item := keyItem(ks.vault, h, k, false)
		if deleted {
			item.RecoveryID = ks.vault.URI() + "deletedkeys/" + h.Name
			item.DeletedDate, item.ScheduledPurgeDate = h.Deleted, h.PurgeAt
		}
		out.Value = append(out.Value, item)
	}
	path := "keys"
	if deleted {
		path = "deletedkeys"
	}
	out.NextLink = nextLink(ks.vault, path, rt, next)
	return out, nil
}

// listKeyVersions is a page of GET /keys/{name}/versions; an unknown name has none.
func listKeyVersions(ks objects[keyVersion], rt route) (keyListJSON, error) {
	out := keyListJSON{Value: []keyBundleJSON{}}
	h, err := ks.active(rt.name)
	if err != nil {
		return out, nil //nolint:nilerr // an unknown or deleted name lists no versions
	}
	vs, err := ks.versions(h)
	if err != nil {
		return out, err
	}
	page, next, err := pageSlice(vs, rt)
	if err != nil {
		return out, err
	}
	for _, k := range page {
		out.Value = append(out.Value, keyItem(ks.vault, h, k, true))
	}
	out.NextLink = nextLink(ks.vault, "keys/"+h.Name+"/versions", rt, next)
	return out, nil
}

// pageSlice cuts a page of versions at the skip token's offset.
func pageSlice[V any](vs []V, rt route) ([]V, string, error) {
	after, err := decodeToken(rt.skipToken)
	if err != nil {
		return nil, "", err
	}
	offset := 0
	if after != "" {
		if offset, err = strconv.Atoi(after); err != nil || offset < 0 {
			return nil, "", errBadParameter("The '$skiptoken' is invalid.")
		}
	}
	offset = min(offset, len(vs))
	end := min(offset+rt.maxResults, len(vs))
	next := ""
	if end < len(vs) {
		next = strconv.Itoa(end)
	}
	return vs[offset:end], next, nil
}
