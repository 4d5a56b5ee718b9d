package keyvault

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// Bounds of request bodies, as Key Vault's.
const (
	maxValueBytes      = 25 * 1024 // a secret value
	maxContentType     = 255
	maxTags            = 15
	maxTagName         = 512
	maxTagValue        = 256
	maxBody            = 256 << 10 // a JSON-escaped value may be several times its size
	maxBackupBlobBytes = 3 << 20   // every version of one secret
	maxRestoreBody     = 5 << 20   // base64url of the largest backup, in JSON
)

// attributesIn are the settable attributes; created, updated and the recovery fields are
// read-only and ignored, as Key Vault ignores them.
type attributesIn struct {
	Enabled   *bool  `json:"enabled"`
	NotBefore *int64 `json:"nbf"`
	Expires   *int64 `json:"exp"`
}

// setBody is PUT /secrets/{name}.
type setBody struct {
	Value       *string           `json:"value"`
	ContentType *string           `json:"contentType"`
	Attributes  *attributesIn     `json:"attributes"`
	Tags        map[string]string `json:"tags"`
}

// updateBody is PATCH /secrets/{name}/{version}.
type updateBody struct {
	ContentType *string           `json:"contentType"`
	Attributes  *attributesIn     `json:"attributes"`
	Tags        map[string]string `json:"tags"`
}

// restoreBody is POST /secrets/restore.
type restoreBody struct {
	Value string `json:"value"` // base64url of a backup blob
}

// decodeObject decodes one JSON object; anything else is BadParameter. Unknown fields are
// ignored, as Key Vault ignores them.
func decodeObject(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errBadParameter("The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errBadParameter("Property '%s' has an invalid type; expected %s.", clip(te.Field, 64), te.Type.String())
		}
		return errBadParameter("The request body is not valid JSON.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errBadParameter("The request body has content after the JSON object.")
	}
	return nil
}

func parseSetBody(body []byte) (setBody, error) {
	var b setBody
	if err := decodeObject(body, &b); err != nil {
		return b, err
	}
	switch {
	case b.Value == nil:
		return b, errBadParameter("Property 'value' is required.")
	case len(*b.Value) > maxValueBytes:
		return b, errBadParameter("Property 'value' exceeds the maximum size of %d bytes.", maxValueBytes)
	case !utf8.ValidString(*b.Value):
		return b, errBadParameter("Property 'value' must be valid UTF-8.")
	}
	return b, checkCommon(b.ContentType, b.Attributes, b.Tags)
}

func parseUpdateBody(body []byte) (updateBody, error) {
	var b updateBody
	if err := decodeObject(body, &b); err != nil {
		return b, err
	}
	return b, checkCommon(b.ContentType, b.Attributes, b.Tags)
}

func parseRestoreBody(body []byte) ([]byte, error) {
	var b restoreBody
	if err := decodeObject(body, &b); err != nil {
		return nil, err
	}
	if b.Value == "" {
		return nil, errBadParameter("Property 'value' is required.")
	}
	if len(b.Value) > base64.RawURLEncoding.EncodedLen(maxBackupBlobBytes) {
		return nil, errBadParameter("Property 'value' is too large.")
	}
	// azsecrets sends base64url without padding; accept padded forms too.
	blob, err := base64.RawURLEncoding.DecodeString(trimPadding(b.Value))
	if err != nil {
		return nil, errBadParameter("Property 'value' is not a valid backup.")
	}
	return blob, nil
}

func trimPadding(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}

func checkCommon(contentType *string, attrs *attributesIn, tags map[string]string) error {
	if contentType != nil && (len(*contentType) > maxContentType || !utf8.ValidString(*contentType)) {
		return errBadParameter("Property 'contentType' must be at most %d characters.", maxContentType)
	}
	if attrs != nil && attrs.NotBefore != nil && attrs.Expires != nil && *attrs.Expires <= *attrs.NotBefore {
		return errBadParameter("Property 'attributes.exp' must be later than 'attributes.nbf'.")
	}
	if attrs != nil {
		for _, t := range []*int64{attrs.NotBefore, attrs.Expires} {
			if t != nil && (*t < 0 || *t > 253402300799) { // years 1970 to 9999
				return errBadParameter("Property 'attributes' has a date out of range.")
			}
		}
	}
	if len(tags) > maxTags {
		return errBadParameter("A maximum of %d tags is allowed.", maxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > maxTagName || len(v) > maxTagValue || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return errBadParameter("Tag names must have 1 to %d characters and tag values at most %d.", maxTagName, maxTagValue)
		}
	}
	return nil
}
