package entra

import (
	"crypto/sha1" //nolint:gosec // x5t is defined as a SHA-1 thumbprint
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxAssertion caps a client assertion before any parsing.
const maxAssertion = 32 << 10

// assertion is a client assertion parsed without verification: enough to decide which key must
// verify it. Nothing in it is trusted until verifyAssertion succeeds.
type assertion struct {
	Raw      string
	Alg      string
	Kid      string
	X5t      []byte // SHA-1 thumbprint, decoded
	X5tS256  []byte // SHA-256 thumbprint, decoded
	X5c0     []byte // first certificate of x5c, DER
	Issuer   string
	Subject  string
	Audience []string
}

func (a *assertion) audience() string { return strings.Join(a.Audience, ",") }

var errMalformed = errors.New("malformed assertion")

// parseAssertion decodes a compact JWS client assertion without verifying it.
func parseAssertion(raw string) (*assertion, error) {
	if len(raw) > maxAssertion {
		return nil, fmt.Errorf("%w: longer than %d bytes", errMalformed, maxAssertion)
	}
	var claims jwt.RegisteredClaims
	tok, _, err := jwt.NewParser().ParseUnverified(raw, &claims)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	a := &assertion{Raw: raw, Issuer: claims.Issuer, Subject: claims.Subject, Audience: claims.Audience}
	var ok bool
	if a.Alg, ok = tok.Header["alg"].(string); !ok {
		return nil, fmt.Errorf("%w: no alg", errMalformed)
	}
	if v, present := tok.Header["kid"]; present {
		if a.Kid, ok = v.(string); !ok {
			return nil, fmt.Errorf("%w: kid is not a string", errMalformed)
		}
	}
	if a.X5t, err = thumbprintHeader(tok.Header, "x5t", sha1.Size); err != nil {
		return nil, err
	}
	if a.X5tS256, err = thumbprintHeader(tok.Header, "x5t#S256", sha256.Size); err != nil {
		return nil, err
	}
	if v, present := tok.Header["x5c"]; present {
		chain, isList := v.([]any)
		if !isList || len(chain) == 0 {
			return nil, fmt.Errorf("%w: x5c is not a list of certificates", errMalformed)
		}
		first, isStr := chain[0].(string)
		if !isStr {
			return nil, fmt.Errorf("%w: x5c is not a list of certificates", errMalformed)
		}
		// x5c is standard base64 (RFC 7515 §4.1.6), never base64url.
		if a.X5c0, err = base64.StdEncoding.DecodeString(first); err != nil {
			return nil, fmt.Errorf("%w: x5c: %w", errMalformed, err)
		}
	}
	return a, nil
}

func thumbprintHeader(h map[string]any, name string, size int) ([]byte, error) {
	v, present := h[name]
	if !present {
		return nil, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a string", errMalformed, name)
	}
	b, err := decodeThumbprint(s)
	if err != nil || len(b) != size {
		return nil, fmt.Errorf("%w: %s is not a thumbprint", errMalformed, name)
	}
	return b, nil
}

// decodeThumbprint accepts what clients send: base64 in either alphabet, padded or not (Go sends
// standard padded, JS base64url, MSAL Python urlsafe padded), and hex, which some tools use.
func decodeThumbprint(s string) ([]byte, error) {
	if len(s) == 2*sha1.Size || len(s) == 2*sha256.Size {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	s = strings.TrimRight(s, "=")
	s = strings.NewReplacer("+", "-", "/", "_").Replace(s)
	return base64.RawURLEncoding.DecodeString(s)
}

// Algorithms accepted for client assertions and federated tokens; anything else (none, HMAC) is
// refused before a key is looked at.
var (
	certificateAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	federatedAlgs   = append([]string{"ES256", "ES384", "ES512"}, certificateAlgs...)
)

// clockSkew is the tolerance on exp and nbf.
const clockSkew = 2 * time.Minute

// verifyAssertion checks the signature with key (an *rsa.PublicKey or *ecdsa.PublicKey), the
// allowed algorithms, and exp/nbf against now with clockSkew; exp is required.
func verifyAssertion(raw string, key any, algs []string, now func() time.Time) (*jwt.RegisteredClaims, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return key, nil },
		jwt.WithValidMethods(algs),
		jwt.WithTimeFunc(now),
		jwt.WithLeeway(clockSkew),
		jwt.WithExpirationRequired(),
	)
	if err != nil {
		return nil, err
	}
	return &claims, nil
}

// assertionError maps a verification failure to Entra's code.
func assertionError(err error, now time.Time) *Error {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return errAssertionTime(now)
	case errors.Is(err, jwt.ErrTokenMalformed), errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, errMalformed):
		return errMalformedAssertion()
	default:
		return errAssertionInvalid("The signature or its algorithm is not valid for the key.")
	}
}
