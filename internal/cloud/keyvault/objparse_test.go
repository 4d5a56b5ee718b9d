package keyvault

import (
	"errors"
	"testing"
)

// FuzzObjectInputs feeds the key and certificate parsers of untrusted input: every failure is a
// Key Vault 400, never a panic.
func FuzzObjectInputs(f *testing.F) {
	for _, s := range []string{
		`{"alg":"RS256","value":"AAAA"}`,
		`{"lifetimeActions":[{"trigger":{"timeAfterCreate":"P30D"},"action":{"type":"Rotate"}}],"attributes":{"expiryTime":"P1Y"}}`,
		"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"MIIB", "CN=a, O=b", `{"kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(err error) {
			var e *Error
			if err != nil && (!errors.As(err, &e) || e.Status != 400) {
				t.Fatalf("err = %v, want a 400", err)
			}
		}
		_, err := parseKeyOpBody([]byte(s))
		check(err)
		_, err = parseRotationPolicy([]byte(s))
		check(err)
		_, _, _, err = parseImport(s, "")
		check(err)
		_, err = parseSubject(s)
		check(err)
		var j jwkIn
		if decodeObject([]byte(s), &j) == nil {
			_, _, err = importPrivate(j)
			check(err)
		}
	})
}
