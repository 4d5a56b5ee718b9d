package keyvault_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azcertificates"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

const (
	roleCryptoOfficer    = "14b46e9e-c2b7-41b4-b07b-48a6ebf60603"
	roleCryptoUser       = "12338af0-0e69-4776-bea7-57ae8d297424"
	roleCryptoEncryption = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
	roleCertsOfficer     = "a4417e6f-fecd-4de8-b567-7b0420556985"
)

// keys is an azkeys client with the same options as secrets.
func (e *env) keys(t *testing.T, vaultURI string, cred azcore.TokenCredential) *azkeys.Client {
	t.Helper()
	c, err := azkeys.NewClient(vaultURI, cred, &azkeys.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rsaPublic(t *testing.T, k *azkeys.JSONWebKey) *rsa.PublicKey {
	t.Helper()
	if k == nil || *k.Kty != azkeys.KeyTypeRSA || len(k.N) == 0 || len(k.D) != 0 || len(k.P) != 0 {
		t.Fatalf("RSA JWK = %+v: want public members only", k)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(k.N), E: int(new(big.Int).SetBytes(k.E).Int64())}
}

// TestKeysRoundTrip runs the key operations through azkeys: create, get, list, versions,
// update, crypto with each algorithm family (checked with Go's crypto on the public key), and
// the refusals a user hits.
func TestKeysRoundTrip(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-keys")
	e.assign(t, e.vaultID("kv-keys"), roleCryptoOfficer, e.s.ObjectID)
	c := e.keys(t, uri, e.owner)
	ctx := t.Context()

	// RSA 2048 with every operation.
	created, err := c.CreateKey(ctx, "rsa", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](2048),
		Tags: map[string]*string{"app": to.Ptr("web")}}, nil)
	if err != nil {
		t.Fatalf("create RSA: %v", err)
	}
	pub := rsaPublic(t, created.Key)
	if pub.N.BitLen() != 2048 || created.Key.KID.Name() != "rsa" || len(created.Key.KID.Version()) != 32 || len(created.Key.KeyOps) != 6 {
		t.Fatalf("created = %+v", created.Key)
	}
	got, err := c.GetKey(ctx, "rsa", "", nil)
	if err != nil || *got.Key.KID != *created.Key.KID || *got.Tags["app"] != "web" || *got.Attributes.RecoveryLevel != "Recoverable+Purgeable" {
		t.Fatalf("get = %+v, %v", got.KeyBundle, err)
	}

	digest := sha256.Sum256([]byte("payload"))
	for _, alg := range []azkeys.SignatureAlgorithm{azkeys.SignatureAlgorithmRS256, azkeys.SignatureAlgorithmPS256} {
		sig, err := c.Sign(ctx, "rsa", "", azkeys.SignParameters{Algorithm: to.Ptr(alg), Value: digest[:]}, nil)
		if err != nil {
			t.Fatalf("sign %s: %v", alg, err)
		}
		if alg == azkeys.SignatureAlgorithmRS256 {
			err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig.Result)
		} else {
			err = rsa.VerifyPSS(pub, crypto.SHA256, digest[:], sig.Result, nil)
		}
		if err != nil {
			t.Fatalf("%s signature does not verify locally: %v", alg, err)
		}
		v, err := c.Verify(ctx, "rsa", created.Key.KID.Version(), azkeys.VerifyParameters{Algorithm: to.Ptr(alg), Digest: digest[:], Signature: sig.Result}, nil)
		if err != nil || !*v.Value {
			t.Fatalf("verify %s = %v, %v", alg, v.Value, err)
		}
		v, err = c.Verify(ctx, "rsa", "", azkeys.VerifyParameters{Algorithm: to.Ptr(alg), Digest: make([]byte, 32), Signature: sig.Result}, nil)
		if err != nil || *v.Value {
			t.Fatalf("verify %s of another digest = %v, %v", alg, v.Value, err)
		}
	}
	d384 := sha512.Sum384([]byte("payload"))
	if _, err := c.Sign(ctx, "rsa", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS384), Value: d384[:]}, nil); err != nil {
		t.Fatalf("sign RS384: %v", err)
	}

	// Encrypt here, decrypt in the vault; and the reverse, with Go's crypto on the public key.
	secret := []byte("a data encryption key, 32 bytes")
	for _, alg := range []azkeys.EncryptionAlgorithm{azkeys.EncryptionAlgorithmRSAOAEP256, azkeys.EncryptionAlgorithmRSAOAEP, azkeys.EncryptionAlgorithmRSA15} {
		enc, err := c.Encrypt(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(alg), Value: secret}, nil)
		if err != nil {
			t.Fatalf("encrypt %s: %v", alg, err)
		}
		dec, err := c.Decrypt(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(alg), Value: enc.Result}, nil)
		if err != nil || !bytes.Equal(dec.Result, secret) {
			t.Fatalf("decrypt %s = %q, %v", alg, dec.Result, err)
		}
		wrapped, err := c.WrapKey(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(alg), Value: secret}, nil)
		if err != nil {
			t.Fatalf("wrap %s: %v", alg, err)
		}
		un, err := c.UnwrapKey(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(alg), Value: wrapped.Result}, nil)
		if err != nil || !bytes.Equal(un.Result, secret) {
			t.Fatalf("unwrap %s = %q, %v", alg, un.Result, err)
		}
	}
	local, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, pub, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	un, err := c.UnwrapKey(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: local}, nil)
	if err != nil || !bytes.Equal(un.Result, secret) {
		t.Fatalf("unwrap of a locally wrapped key = %q, %v", un.Result, err)
	}
	_, err = c.Decrypt(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: make([]byte, 256)}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")

	// EC keys: ES256 on P-256, ES384 on P-384, ES512 on P-521, verified locally.
	for _, tc := range []struct {
		crv  azkeys.CurveName
		alg  azkeys.SignatureAlgorithm
		hash crypto.Hash
	}{{azkeys.CurveNameP256, azkeys.SignatureAlgorithmES256, crypto.SHA256}, {azkeys.CurveNameP384, azkeys.SignatureAlgorithmES384, crypto.SHA384}, {azkeys.CurveNameP521, azkeys.SignatureAlgorithmES512, crypto.SHA512}} {
		name := "ec-" + string(tc.alg)
		k, err := c.CreateKey(ctx, name, azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(tc.crv)}, nil)
		if err != nil {
			t.Fatalf("create %s: %v", tc.crv, err)
		}
		curve := map[azkeys.CurveName]elliptic.Curve{azkeys.CurveNameP256: elliptic.P256(), azkeys.CurveNameP384: elliptic.P384(), azkeys.CurveNameP521: elliptic.P521()}[tc.crv]
		ecPub, err := ecdsa.ParseUncompressedPublicKey(curve, append(append([]byte{4}, k.Key.X...), k.Key.Y...))
		if err != nil {
			t.Fatalf("%s public key: %v", tc.crv, err)
		}
		h := tc.hash.New()
		h.Write([]byte("payload"))
		dg := h.Sum(nil)
		sig, err := c.Sign(ctx, name, "", azkeys.SignParameters{Algorithm: to.Ptr(tc.alg), Value: dg}, nil)
		if err != nil {
			t.Fatalf("sign %s: %v", tc.alg, err)
		}
		n := len(sig.Result) / 2
		if !ecdsa.Verify(ecPub, dg, new(big.Int).SetBytes(sig.Result[:n]), new(big.Int).SetBytes(sig.Result[n:])) {
			t.Fatalf("%s signature does not verify locally", tc.alg)
		}
		// An EC key does not encrypt, and ES256 needs P-256.
		_, err = c.Encrypt(ctx, name, "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP), Value: secret}, nil)
		cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden") // not in an EC key's key_ops
	}

	// Bad input: unknown algorithm, wrong digest size, an op outside key_ops.
	_, err = c.Sign(ctx, "rsa", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithm("RS999")), Value: digest[:]}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	_, err = c.Sign(ctx, "rsa", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:20]}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	_, err = c.Sign(ctx, "rsa", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmES256), Value: digest[:]}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	_, err = c.Encrypt(ctx, "rsa", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmA256GCM), Value: secret}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	signOnly, err := c.CreateKey(ctx, "sign-only", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA),
		KeyOps: []*azkeys.KeyOperation{to.Ptr(azkeys.KeyOperationSign), to.Ptr(azkeys.KeyOperationVerify)}}, nil)
	if err != nil || len(signOnly.Key.KeyOps) != 2 {
		t.Fatalf("create sign-only: %v", err)
	}
	_, err = c.WrapKey(ctx, "sign-only", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: secret}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if code := innerCode(t, err); code != "KeyOperationForbidden" {
		t.Errorf("wrap with a sign-only key: innererror %q", code)
	}
	_, err = c.CreateKey(ctx, "bad", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA), KeySize: to.Ptr[int32](1024)}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	_, err = c.CreateKey(ctx, "bad", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSAHSM)}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter") // a standard vault has no HSM keys
	_, err = c.CreateKey(ctx, "bad", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(azkeys.CurveNameP256K)}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")

	// Update: disable, then every operation but the update is refused; expired keys still
	// verify and decrypt but no longer sign.
	v1 := created.Key.KID.Version()
	if _, err := c.UpdateKey(ctx, "rsa", v1, azkeys.UpdateKeyParameters{KeyAttributes: &azkeys.KeyAttributes{Enabled: to.Ptr(false)}}, nil); err != nil {
		t.Fatalf("disable: %v", err)
	}
	_, err = c.Sign(ctx, "rsa", v1, azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	_, err = c.GetKey(ctx, "rsa", v1, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	past := time.Now().Add(-time.Hour)
	if _, err := c.UpdateKey(ctx, "rsa", v1, azkeys.UpdateKeyParameters{KeyAttributes: &azkeys.KeyAttributes{Enabled: to.Ptr(true), Expires: &past}}, nil); err != nil {
		t.Fatalf("expire: %v", err)
	}
	_, err = c.Sign(ctx, "rsa", v1, azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if code := innerCode(t, err); code != "KeyExpired" {
		t.Errorf("sign with an expired key: innererror %q", code)
	}
	if _, err := c.UnwrapKey(ctx, "rsa", v1, azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: local}, nil); err != nil {
		t.Fatalf("unwrap with an expired key: %v", err)
	}

	// Rotation: a policy with an expiry, then a new version with the same shape.
	if _, err := c.UpdateKeyRotationPolicy(ctx, "rsa", azkeys.KeyRotationPolicy{
		Attributes: &azkeys.KeyRotationPolicyAttributes{ExpiryTime: to.Ptr("P90D")},
		LifetimeActions: []*azkeys.LifetimeAction{{
			Action:  &azkeys.LifetimeActionType{Type: to.Ptr(azkeys.KeyRotationPolicyActionRotate)},
			Trigger: &azkeys.LifetimeActionTrigger{TimeAfterCreate: to.Ptr("P30D")},
		}},
	}, nil); err != nil {
		t.Fatalf("set rotation policy: %v", err)
	}
	pol, err := c.GetKeyRotationPolicy(ctx, "rsa", nil)
	if err != nil || *pol.Attributes.ExpiryTime != "P90D" || len(pol.LifetimeActions) != 1 {
		t.Fatalf("rotation policy = %+v, %v", pol, err)
	}
	_, err = c.UpdateKeyRotationPolicy(ctx, "rsa", azkeys.KeyRotationPolicy{Attributes: &azkeys.KeyRotationPolicyAttributes{ExpiryTime: to.Ptr("90 days")}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	rotated, err := c.RotateKey(ctx, "rsa", nil)
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	if rotated.Key.KID.Version() == v1 || rsaPublic(t, rotated.Key).N.Cmp(pub.N) == 0 || rotated.Attributes.Expires == nil ||
		rotated.Attributes.Expires.Before(time.Now().Add(89*24*time.Hour)) {
		t.Fatalf("rotated = %+v", rotated.KeyBundle)
	}
	versions := 0
	for p := c.NewListKeyPropertiesVersionsPager("rsa", nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		versions += len(page.Value)
	}
	if versions != 2 {
		t.Fatalf("rsa has %d versions, want 2", versions)
	}
	names := map[string]bool{}
	for p := c.NewListKeyPropertiesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range page.Value {
			names[k.KID.Name()] = true
		}
	}
	if len(names) != 5 || !names["rsa"] || !names["ec-ES512"] {
		t.Fatalf("listed keys %v", names)
	}
}

// TestKeysLifecycle covers import, backup, soft delete, recover, purge and restore.
func TestKeysLifecycle(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-keylife")
	e.assign(t, e.vaultID("kv-keylife"), roleCryptoOfficer, e.s.ObjectID)
	c := e.keys(t, uri, e.owner)
	ctx := t.Context()

	// Import RSA and EC JWKs made here; the vault answers with their public halves only.
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	imp, err := c.ImportKey(ctx, "imported", azkeys.ImportKeyParameters{Key: &azkeys.JSONWebKey{
		Kty: to.Ptr(azkeys.KeyTypeRSA), N: rk.N.Bytes(), E: big.NewInt(int64(rk.E)).Bytes(), D: rk.D.Bytes(),
		P: rk.Primes[0].Bytes(), Q: rk.Primes[1].Bytes(), DP: rk.Precomputed.Dp.Bytes(), DQ: rk.Precomputed.Dq.Bytes(), QI: rk.Precomputed.Qinv.Bytes(),
	}}, nil)
	if err != nil {
		t.Fatalf("import RSA: %v", err)
	}
	if rsaPublic(t, imp.Key).N.Cmp(rk.N) != 0 {
		t.Fatal("imported key has another modulus")
	}
	digest := sha256.Sum256([]byte("x"))
	sig, err := c.Sign(ctx, "imported", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
	if err != nil || rsa.VerifyPKCS1v15(&rk.PublicKey, crypto.SHA256, digest[:], sig.Result) != nil {
		t.Fatalf("sign with imported key: %v", err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := ek.PublicKey.Bytes()
	if _, err := c.ImportKey(ctx, "imported-ec", azkeys.ImportKeyParameters{Key: &azkeys.JSONWebKey{
		Kty: to.Ptr(azkeys.KeyTypeEC), Crv: to.Ptr(azkeys.CurveNameP384), X: raw[1:49], Y: raw[49:], D: mustBytes(t, ek),
	}}, nil); err != nil {
		t.Fatalf("import EC: %v", err)
	}
	_, err = c.ImportKey(ctx, "bad", azkeys.ImportKeyParameters{Key: &azkeys.JSONWebKey{Kty: to.Ptr(azkeys.KeyTypeRSA), N: rk.N.Bytes(), E: []byte{1, 0, 1}}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter") // no private key
	_, err = c.ImportKey(ctx, "bad", azkeys.ImportKeyParameters{Key: &azkeys.JSONWebKey{
		Kty: to.Ptr(azkeys.KeyTypeEC), Crv: to.Ptr(azkeys.CurveNameP384), X: raw[1:49], Y: raw[1:49], D: mustBytes(t, ek)}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter") // y does not match d

	// Backup, delete, purge, restore: the same key comes back.
	backup, err := c.BackupKey(ctx, "imported", nil)
	if err != nil || len(backup.Value) == 0 || bytes.Contains(backup.Value, rk.D.Bytes()) {
		t.Fatalf("backup: %v", err)
	}
	del, err := c.DeleteKey(ctx, "imported", nil)
	if err != nil || del.RecoveryID == nil || del.DeletedDate == nil {
		t.Fatalf("delete = %+v, %v", del, err)
	}
	_, err = c.GetKey(ctx, "imported", "", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "KeyNotFound")
	_, err = c.CreateKey(ctx, "imported", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA)}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	if _, err := c.GetDeletedKey(ctx, "imported", nil); err != nil {
		t.Fatalf("get deleted: %v", err)
	}
	deleted := 0
	for p := c.NewListDeletedKeyPropertiesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deleted += len(page.Value)
	}
	if deleted != 1 {
		t.Fatalf("%d deleted keys listed", deleted)
	}
	if _, err := c.RecoverDeletedKey(ctx, "imported", nil); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if _, err := c.GetKey(ctx, "imported", "", nil); err != nil {
		t.Fatalf("get recovered: %v", err)
	}
	if _, err := c.DeleteKey(ctx, "imported", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PurgeDeletedKey(ctx, "imported", nil); err != nil {
		t.Fatalf("purge: %v", err)
	}
	restored, err := c.RestoreKey(ctx, azkeys.RestoreKeyParameters{KeyBackup: backup.Value}, nil)
	if err != nil || rsaPublic(t, restored.Key).N.Cmp(rk.N) != 0 || *restored.Key.KID != *imp.Key.KID {
		t.Fatalf("restore: %v", err)
	}
	_, err = c.RestoreKey(ctx, azkeys.RestoreKeyParameters{KeyBackup: backup.Value}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	backup.Value[len(backup.Value)-1] ^= 1
	_, err = c.RestoreKey(ctx, azkeys.RestoreKeyParameters{KeyBackup: backup.Value}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
}

// TestKeyRoles: Crypto User uses keys but cannot create them; Crypto Service Encryption User
// only wraps and unwraps; without a role, nothing.
func TestKeyRoles(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-keyroles")
	id := e.vaultID("kv-keyroles")
	e.assign(t, id, roleCryptoOfficer, e.s.ObjectID)
	ctx := t.Context()
	if _, err := e.keys(t, uri, e.owner).CreateKey(ctx, "k", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA)}, nil); err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("x"))
	sign := func(c *azkeys.Client) error {
		_, err := c.Sign(ctx, "k", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
		return err
	}
	wrap := func(c *azkeys.Client) error {
		_, err := c.WrapKey(ctx, "k", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP256), Value: digest[:]}, nil)
		return err
	}
	create := func(c *azkeys.Client) error {
		_, err := c.CreateKey(ctx, "k2", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC)}, nil)
		return err
	}

	none, noneCred := cloudtest.NewPrincipal(t, e.c, "none")
	_ = none
	c := e.keys(t, uri, noneCred)
	for _, f := range []func(*azkeys.Client) error{sign, wrap, create} {
		cloudtest.RespErr(t, f(c), http.StatusForbidden, "Forbidden")
	}

	user, userCred := cloudtest.NewPrincipal(t, e.c, "crypto-user")
	e.assign(t, id, roleCryptoUser, user.ObjectID)
	c = e.keys(t, uri, userCred)
	if err := sign(c); err != nil {
		t.Fatalf("Crypto User sign: %v", err)
	}
	if err := wrap(c); err != nil {
		t.Fatalf("Crypto User wrap: %v", err)
	}
	cloudtest.RespErr(t, create(c), http.StatusForbidden, "Forbidden")

	enc, encCred := cloudtest.NewPrincipal(t, e.c, "encryption-user")
	e.assign(t, id, roleCryptoEncryption, enc.ObjectID)
	c = e.keys(t, uri, encCred)
	if err := wrap(c); err != nil {
		t.Fatalf("Service Encryption User wrap: %v", err)
	}
	cloudtest.RespErr(t, sign(c), http.StatusForbidden, "Forbidden")
	if code := innerCode(t, sign(c)); code != "ForbiddenByRbac" {
		t.Errorf("innererror %q", code)
	}
}

// TestKeyAndCertificateAccessPolicies: in access-policy mode the `keys` and `certificates`
// lists decide, each for its own objects; a premium vault takes -HSM keys.
func TestKeyAndCertificateAccessPolicies(t *testing.T) {
	e := start(t)
	app, cred := cloudtest.NewPrincipal(t, e.c, "app")
	entry := func(objectID string, keys []armkeyvault.KeyPermissions, certs []armkeyvault.CertificatePermissions) *armkeyvault.AccessPolicyEntry {
		p := &armkeyvault.Permissions{}
		for _, k := range keys {
			p.Keys = append(p.Keys, to.Ptr(k))
		}
		for _, c := range certs {
			p.Certificates = append(p.Certificates, to.Ptr(c))
		}
		return &armkeyvault.AccessPolicyEntry{TenantID: to.Ptr(e.s.TenantID), ObjectID: to.Ptr(objectID), Permissions: p}
	}
	poller, err := e.vaults(t).BeginCreateOrUpdate(t.Context(), e.rg, "kv-keypolicies", armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(e.s.TenantID), SKU: &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNamePremium)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{
				entry(e.s.ObjectID, []armkeyvault.KeyPermissions{armkeyvault.KeyPermissionsAll}, []armkeyvault.CertificatePermissions{armkeyvault.CertificatePermissionsAll}),
				entry(app.ObjectID, []armkeyvault.KeyPermissions{armkeyvault.KeyPermissionsGet, armkeyvault.KeyPermissionsSign}, []armkeyvault.CertificatePermissions{armkeyvault.CertificatePermissionsGet}),
			},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := poller.PollUntilDone(t.Context(), &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	uri, ctx := *v.Properties.VaultURI, t.Context()
	hsm, err := e.keys(t, uri, e.owner).CreateKey(ctx, "hsm", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSAHSM)}, nil)
	if err != nil || *hsm.Key.Kty != azkeys.KeyTypeRSAHSM {
		t.Fatalf("RSA-HSM on a premium vault: %v", err)
	}
	if _, err := e.certs(t, uri, e.owner).CreateCertificate(ctx, "c", azcertificates.CreateCertificateParameters{
		CertificatePolicy: selfPolicy("CN=c", "application/x-pkcs12", azcertificates.KeyTypeRSA)}, nil); err != nil {
		t.Fatal(err)
	}
	kc := e.keys(t, uri, cred)
	digest := sha256.Sum256([]byte("x"))
	if _, err := kc.Sign(ctx, "hsm", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmPS256), Value: digest[:]}, nil); err != nil {
		t.Fatalf("sign with keys [get sign]: %v", err)
	}
	_, err = kc.WrapKey(ctx, "hsm", "", azkeys.KeyOperationParameters{Algorithm: to.Ptr(azkeys.EncryptionAlgorithmRSAOAEP), Value: digest[:]}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if code := innerCode(t, err); code != "AccessDenied" {
		t.Errorf("innererror %q, want AccessDenied", code)
	}
	_, err = kc.CreateKey(ctx, "new", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC)}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if _, err := e.certs(t, uri, cred).GetCertificate(ctx, "c", "", nil); err != nil {
		t.Fatalf("get certificate with certificates [get]: %v", err)
	}
	_, err = e.secrets(t, uri, cred).GetSecret(ctx, "c", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden") // no secrets permission
}

func mustBytes(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
