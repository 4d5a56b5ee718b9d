package keyvault

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// keyVersion is one version of a key. The private key stays in the store; answers carry only
// its public half, and only a sealed backup carries it out.
type keyVersion struct {
	ID        string            `json:"id"`
	Kty       string            `json:"kty"` // RSA, RSA-HSM, EC, EC-HSM
	Ops       []string          `json:"ops"`
	Private   []byte            `json:"private"` // PKCS #8 DER
	Tags      map[string]string `json:"tags,omitempty"`
	Enabled   bool              `json:"enabled"`
	NotBefore *int64            `json:"nbf,omitempty"`
	Expires   *int64            `json:"exp,omitempty"`
	Created   int64             `json:"created"`
	Updated   int64             `json:"updated"`
	// Managed is set on the key behind a certificate: it changes only through the certificate.
	Managed bool `json:"managed,omitempty"`
}

func (k keyVersion) versionID() string { return k.ID }
func (k keyVersion) createdAt() int64  { return k.Created }

// signer parses the private key.
func (k keyVersion) signer() (crypto.Signer, error) {
	p, err := x509.ParsePKCS8PrivateKey(k.Private)
	if err != nil {
		return nil, fmt.Errorf("parse stored key: %w", err)
	}
	s, ok := p.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("parse stored key: %T is not a signer", p)
	}
	return s, nil
}

func (k keyVersion) allows(op string) bool {
	return slices.ContainsFunc(k.Ops, func(o string) bool { return strings.EqualFold(o, op) })
}

// Key operations by their JWK names.
const (
	keyOpEncrypt = "encrypt"
	keyOpDecrypt = "decrypt"
	keyOpSign    = "sign"
	keyOpVerify  = "verify"
	keyOpWrap    = "wrapKey"
	keyOpUnwrap  = "unwrapKey"
)

var allKeyOps = []string{keyOpEncrypt, keyOpDecrypt, keyOpSign, keyOpVerify, keyOpWrap, keyOpUnwrap, "import", "export"}

// defaultOps are the operations a key gets when its request names none.
func defaultOps(kty string) []string {
	if isEC(kty) {
		return []string{keyOpSign, keyOpVerify}
	}
	return []string{keyOpEncrypt, keyOpDecrypt, keyOpSign, keyOpVerify, keyOpWrap, keyOpUnwrap}
}

// canonicalOps checks and spells key_ops as Key Vault does.
func canonicalOps(ops []string, kty string) ([]string, error) {
	if ops == nil {
		return defaultOps(kty), nil
	}
	out := []string{}
	for _, o := range ops {
		i := slices.IndexFunc(allKeyOps, func(k string) bool { return strings.EqualFold(k, o) })
		if i < 0 {
			return nil, errBadParameter("Property 'key_ops' has an invalid value: %s.", clip(o, 32))
		}
		if !slices.Contains(out, allKeyOps[i]) {
			out = append(out, allKeyOps[i])
		}
	}
	return out, nil
}

func isEC(kty string) bool { return kty == "EC" || kty == "EC-HSM" }

// checkKty accepts the key types of a vault: RSA and EC, and their -HSM forms on premium vaults.
func checkKty(v Vault, kty string) (string, error) {
	for _, k := range []string{"RSA", "EC", "RSA-HSM", "EC-HSM"} {
		if strings.EqualFold(k, kty) {
			if strings.HasSuffix(k, "-HSM") && !v.Premium {
				return "", errBadParameter("Key type %s is only supported by vaults of the premium SKU.", k)
			}
			return k, nil
		}
	}
	if kty == "" {
		return "", errBadParameter("Property 'kty' is required.")
	}
	return "", errBadParameter("Key type %s is not supported by this vault; use RSA, EC, RSA-HSM or EC-HSM.", clip(kty, 32))
}

func curveOf(crv string) (elliptic.Curve, error) {
	switch strings.ToUpper(crv) {
	case "P-256":
		return elliptic.P256(), nil
	case "P-384":
		return elliptic.P384(), nil
	case "P-521":
		return elliptic.P521(), nil
	}
	return nil, errBadParameter("Curve %s is not supported; use P-256, P-384 or P-521.", clip(crv, 16))
}

// generate makes a new private key for a create or rotate request.
func generate(kty string, size int, exponent int, crv string) ([]byte, error) {
	var priv any
	if isEC(kty) {
		if crv == "" {
			crv = "P-256"
		}
		c, err := curveOf(crv)
		if err != nil {
			return nil, err
		}
		if priv, err = ecdsa.GenerateKey(c, rand.Reader); err != nil {
			return nil, fmt.Errorf("generate key: %w", err)
		}
	} else {
		if size == 0 {
			size = 2048
		}
		if size != 2048 && size != 3072 && size != 4096 {
			return nil, errBadParameter("Property 'key_size' must be 2048, 3072 or 4096 for RSA keys.")
		}
		if exponent != 0 && exponent != 65537 {
			return nil, errBadParameter("Property 'public_exponent' must be 65537.")
		}
		var err error
		if priv, err = rsa.GenerateKey(rand.Reader, size); err != nil {
			return nil, fmt.Errorf("generate key: %w", err)
		}
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return der, nil
}

// keyShape is what a rotation repeats: the type, size and curve of a key.
func keyShape(k keyVersion) (size int, crv string, err error) {
	s, err := k.signer()
	if err != nil {
		return 0, "", err
	}
	switch p := s.Public().(type) {
	case *rsa.PublicKey:
		return p.N.BitLen(), "", nil
	case *ecdsa.PublicKey:
		return 0, p.Curve.Params().Name, nil
	}
	return 0, "", fmt.Errorf("unexpected key %T", s)
}

// importPrivate builds a private key from a JWK with its private members.
func importPrivate(j jwkIn) ([]byte, string, error) {
	kty := strings.ToUpper(strings.TrimSuffix(strings.ToUpper(j.Kty), "-HSM"))
	var priv any
	switch kty {
	case "RSA":
		if len(j.N) == 0 || len(j.E) == 0 || len(j.D) == 0 || len(j.P) == 0 || len(j.Q) == 0 {
			return nil, "", errBadParameter("An RSA key to import needs n, e, d, p and q.")
		}
		e := new(big.Int).SetBytes(j.E)
		if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 {
			return nil, "", errBadParameter("The RSA key's exponent is out of range.")
		}
		k := &rsa.PrivateKey{
			PublicKey: rsa.PublicKey{N: new(big.Int).SetBytes(j.N), E: int(e.Int64())}, //nolint:gosec // bounded just above
			D:         new(big.Int).SetBytes(j.D),
			Primes:    []*big.Int{new(big.Int).SetBytes(j.P), new(big.Int).SetBytes(j.Q)},
		}
		if bits := k.N.BitLen(); bits != 2048 && bits != 3072 && bits != 4096 {
			return nil, "", errBadParameter("RSA keys must have 2048, 3072 or 4096 bits.")
		}
		if err := k.Validate(); err != nil {
			return nil, "", errBadParameter("The RSA key is not valid.")
		}
		k.Precompute()
		priv = k
	case "EC":
		c, err := curveOf(j.Crv)
		if err != nil {
			return nil, "", err
		}
		k, err := ecdsa.ParseRawPrivateKey(c, j.D)
		if err != nil {
			return nil, "", errBadParameter("The EC key is not valid.")
		}
		size := (c.Params().BitSize + 7) / 8
		want := append(append([]byte{4}, leftPad(j.X, size)...), leftPad(j.Y, size)...)
		pub, err := k.PublicKey.Bytes()
		if err != nil || !slices.Equal(pub, want) {
			return nil, "", errBadParameter("The EC key's x and y do not match its d.")
		}
		priv = k
	case "":
		return nil, "", errBadParameter("Property 'key.kty' is required.")
	default:
		return nil, "", errBadParameter("Key type %s cannot be imported into this vault; use RSA or EC.", clip(j.Kty, 32))
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, "", fmt.Errorf("encode key: %w", err)
	}
	return der, kty, nil
}

func leftPad(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b)), b...)
}

func (s *Service) keys(tx *store.Tx, v Vault) objects[keyVersion] {
	return objects[keyVersion]{
		tx: tx, vault: v, now: s.now().Unix(),
		heads: bucketKeyHeads, versionsB: bucketKeyVersions, extras: []string{bucketKeyPolicies},
		noun: "key", code: "KeyNotFound", title: "Key",
	}
}

// addKeyVersion writes a new version, creating the name if needed.
func addKeyVersion(ks objects[keyVersion], name string, kv keyVersion) (head, keyVersion, error) {
	h, ok, err := ks.claim(name)
	if err != nil {
		return h, kv, err
	}
	if !ok {
		h = head{Name: name}
	} else if cur, err := ks.version(h, ""); err == nil && cur.Managed && !kv.Managed {
		return h, kv, errManaged("key", h.Name)
	}
	kv.ID, kv.Created, kv.Updated = newVersionID(), ks.now, ks.now
	h.Latest = kv.ID
	return h, kv, ks.put(h, kv)
}

func errManaged(noun, name string) *Error {
	return errorf(http.StatusForbidden, "Forbidden",
		"The %s %s is managed by a certificate of the same name; change it through the certificate.", noun, name).inner("ManagedObject")
}

// usable refuses an operation on a disabled key, and the operations that create protected
// data (sign, encrypt, wrapKey) outside the key's nbf/exp window, as Key Vault does; verify,
// decrypt and unwrapKey stay possible on an expired key so that old data stays readable.
func usable(k keyVersion, op string, now int64) error {
	if !k.Enabled {
		return errorf(http.StatusForbidden, "Forbidden", "Operation %s is not allowed on a disabled key.", op).inner("KeyDisabled")
	}
	if op != keyOpSign && op != keyOpEncrypt && op != keyOpWrap {
		return nil
	}
	if k.NotBefore != nil && now < *k.NotBefore {
		return errorf(http.StatusForbidden, "Forbidden", "Operation %s is not allowed on a key before its activation date (nbf).", op).inner("KeyNotYetValid")
	}
	if k.Expires != nil && now >= *k.Expires {
		return errorf(http.StatusForbidden, "Forbidden", "Operation %s is not allowed on an expired key.", op).inner("KeyExpired")
	}
	return nil
}
