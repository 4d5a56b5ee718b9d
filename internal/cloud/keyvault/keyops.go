package keyvault

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // RSA-OAEP is defined with SHA-1; Key Vault offers it
	"crypto/sha256"
	"math/big"
	"strings"
)

// keyOpBody is the body of sign, verify, encrypt, decrypt, wrapkey and unwrapkey.
type keyOpBody struct {
	Alg    string `json:"alg"`
	Value  b64    `json:"value"`
	Digest b64    `json:"digest"` // verify
}

// keyOpResult is a KeyOperationResult; Verified is KeyVerifyResult's value.
type keyOpResult struct {
	Kid   string `json:"kid"`
	Value b64    `json:"value"`
}

type verifyResult struct {
	Value bool `json:"value"`
}

// maxOpInput bounds the value of a key operation: larger than any RSA-4096 block.
const maxOpInput = 1024

func parseKeyOpBody(body []byte) (keyOpBody, error) {
	var b keyOpBody
	if err := decodeObject(body, &b); err != nil {
		return b, err
	}
	if b.Alg == "" {
		return b, errBadParameter("Property 'alg' is required.")
	}
	if b.Value == nil {
		return b, errBadParameter("Property 'value' is required.")
	}
	if len(b.Value) > maxOpInput || len(b.Digest) > maxOpInput {
		return b, errBadParameter("Property 'value' is too large.")
	}
	return b, nil
}

// opOf maps a route to the key_ops name it needs.
var opOf = map[op]string{
	opKeySign: keyOpSign, opKeyVerify: keyOpVerify, opKeyEncrypt: keyOpEncrypt,
	opKeyDecrypt: keyOpDecrypt, opKeyWrap: keyOpWrap, opKeyUnwrap: keyOpUnwrap,
}

// runKeyOp performs a cryptographic operation with a version the caller may use.
func runKeyOp(v Vault, h head, k keyVersion, o op, b keyOpBody, now int64) (any, error) {
	name := opOf[o]
	if err := usable(k, name, now); err != nil {
		return nil, err
	}
	if !k.allows(name) {
		return nil, errorf(403, "Forbidden", "Operation %s is not permitted on this key: it is not in the key's key_ops.", name).inner("KeyOperationForbidden")
	}
	s, err := k.signer()
	if err != nil {
		return nil, err
	}
	kid := keyID(v, h.Name, k.ID)
	switch o {
	case opKeySign:
		sig, err := sign(s, b.Alg, b.Value)
		return keyOpResult{Kid: kid, Value: sig}, err
	case opKeyVerify:
		ok, err := verify(s, b.Alg, b.Digest, b.Value)
		return verifyResult{Value: ok}, err
	case opKeyEncrypt, opKeyWrap:
		out, err := encrypt(s, b.Alg, b.Value)
		return keyOpResult{Kid: kid, Value: out}, err
	default:
		out, err := decrypt(s, b.Alg, b.Value)
		return keyOpResult{Kid: kid, Value: out}, err
	}
}

// sigAlg is a signature algorithm: its hash, and whether it is PSS or ECDSA.
type sigAlg struct {
	hash  crypto.Hash
	pss   bool
	ec    string // the curve an ES algorithm needs
	isECC bool
}

var sigAlgs = map[string]sigAlg{
	"RS256": {hash: crypto.SHA256}, "RS384": {hash: crypto.SHA384}, "RS512": {hash: crypto.SHA512},
	"PS256": {hash: crypto.SHA256, pss: true}, "PS384": {hash: crypto.SHA384, pss: true}, "PS512": {hash: crypto.SHA512, pss: true},
	"ES256": {hash: crypto.SHA256, isECC: true, ec: "P-256"}, "ES384": {hash: crypto.SHA384, isECC: true, ec: "P-384"},
	"ES512": {hash: crypto.SHA512, isECC: true, ec: "P-521"},
}

func sigAlgFor(s crypto.Signer, alg string, digest []byte) (sigAlg, error) {
	a, ok := sigAlgs[strings.ToUpper(alg)]
	if !ok {
		return a, errBadParameter("Algorithm %s is not a supported signature algorithm; use RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 or ES512.", clip(alg, 32))
	}
	switch p := s.Public().(type) {
	case *rsa.PublicKey:
		if a.isECC {
			return a, errBadParameter("Algorithm %s cannot be used with an RSA key.", strings.ToUpper(alg))
		}
	case *ecdsa.PublicKey:
		if !a.isECC {
			return a, errBadParameter("Algorithm %s cannot be used with an EC key.", strings.ToUpper(alg))
		}
		if p.Curve.Params().Name != a.ec {
			return a, errBadParameter("Algorithm %s needs a key on curve %s; this key is on %s.", strings.ToUpper(alg), a.ec, p.Curve.Params().Name)
		}
	}
	if len(digest) != a.hash.Size() {
		return a, errBadParameter("The digest has %d bytes; %s needs a %d-byte digest.", len(digest), strings.ToUpper(alg), a.hash.Size())
	}
	return a, nil
}

func sign(s crypto.Signer, alg string, digest []byte) ([]byte, error) {
	a, err := sigAlgFor(s, alg, digest)
	if err != nil {
		return nil, err
	}
	var opts crypto.SignerOpts = a.hash
	if a.pss {
		opts = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: a.hash}
	}
	if k, ok := s.(*ecdsa.PrivateKey); ok {
		// JWS signatures are r||s, each the size of the curve's order.
		r, sv, err := ecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			return nil, err
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		return append(leftPad(r.Bytes(), size), leftPad(sv.Bytes(), size)...), nil
	}
	return s.Sign(rand.Reader, digest, opts)
}

func verify(s crypto.Signer, alg string, digest, sig []byte) (bool, error) {
	a, err := sigAlgFor(s, alg, digest)
	if err != nil {
		return false, err
	}
	switch p := s.Public().(type) {
	case *rsa.PublicKey:
		if a.pss {
			return rsa.VerifyPSS(p, a.hash, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto, Hash: a.hash}) == nil, nil
		}
		return rsa.VerifyPKCS1v15(p, a.hash, digest, sig) == nil, nil
	case *ecdsa.PublicKey:
		size := (p.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false, nil
		}
		r, sv := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(p, digest, r, sv), nil
	}
	return false, nil
}

func rsaKey(s crypto.Signer, alg string) (*rsa.PrivateKey, string, error) {
	alg = strings.ToUpper(alg)
	switch alg {
	case "RSA1_5", "RSA-OAEP", "RSA-OAEP-256":
	default:
		return nil, "", errBadParameter("Algorithm %s is not a supported encryption algorithm; use RSA1_5, RSA-OAEP or RSA-OAEP-256.", clip(alg, 32))
	}
	k, ok := s.(*rsa.PrivateKey)
	if !ok {
		return nil, "", errBadParameter("Algorithm %s cannot be used with an EC key.", alg)
	}
	return k, alg, nil
}

func encrypt(s crypto.Signer, alg string, plain []byte) ([]byte, error) {
	k, alg, err := rsaKey(s, alg)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch alg {
	case "RSA1_5":
		out, err = rsa.EncryptPKCS1v15(rand.Reader, &k.PublicKey, plain) //nolint:staticcheck // RSA1_5 is a Key Vault algorithm
	case "RSA-OAEP":
		out, err = rsa.EncryptOAEP(sha1.New(), rand.Reader, &k.PublicKey, plain, nil) //nolint:gosec // RSA-OAEP is SHA-1 by definition
	default:
		out, err = rsa.EncryptOAEP(sha256.New(), rand.Reader, &k.PublicKey, plain, nil)
	}
	if err != nil {
		return nil, errBadParameter("The value is too long for %s with this key.", alg)
	}
	return out, nil
}

// decrypt reports every failure the same way, so the answer is no padding oracle.
func decrypt(s crypto.Signer, alg string, cipher []byte) ([]byte, error) {
	k, alg, err := rsaKey(s, alg)
	if err != nil {
		return nil, err
	}
	var out []byte
	switch alg {
	case "RSA1_5":
		out, err = rsa.DecryptPKCS1v15(rand.Reader, k, cipher) //nolint:staticcheck // RSA1_5 is a Key Vault algorithm
	case "RSA-OAEP":
		out, err = rsa.DecryptOAEP(sha1.New(), rand.Reader, k, cipher, nil) //nolint:gosec // RSA-OAEP is SHA-1 by definition
	default:
		out, err = rsa.DecryptOAEP(sha256.New(), rand.Reader, k, cipher, nil)
	}
	if err != nil {
		return nil, errBadParameter("The value could not be decrypted with this key and algorithm.")
	}
	return out, nil
}
