package csiprovider_test

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azcertificates"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"google.golang.org/grpc/codes"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

const (
	roleKVAdmin         = "00482a5a-887f-4fb3-b363-3b7fe8e74483"
	roleCertificateUser = "db79e9a7-68ee-4b58-9aeb-b90e7c24fcba"
)

func pemBlock(t *testing.T, s, typ string) []byte {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	if b == nil || b.Type != typ {
		t.Fatalf("file is not a PEM %s: %q", typ, s)
	}
	return b.Bytes
}

// TestMountKeysAndCertificates: objectType key is the public key in PEM, objectType cert the
// certificate in PEM, and the certificate's secret its key and certificate; objectVersion and
// objectVersionHistory pick versions; a rotation shows at the next mount.
func TestMountKeysAndCertificates(t *testing.T) {
	e, sp, reader := spEnv(t, 0)
	e.assign(t, e.vaultID, roleKVAdmin, e.s.ObjectID)
	e.assign(t, e.vaultID, roleCertificateUser, reader)
	ctx := t.Context()
	kc, err := azkeys.NewClient(e.uri, e.owner, &azkeys.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := azcertificates.NewClient(e.uri, e.owner, &azcertificates.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	rk, err := kc.CreateKey(ctx, "signing", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeRSA)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := kc.CreateKey(ctx, "ec-signing", azkeys.CreateKeyParameters{Kty: to.Ptr(azkeys.KeyTypeEC), Curve: to.Ptr(azkeys.CurveNameP384)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	policy := &azcertificates.CertificatePolicy{
		IssuerParameters: &azcertificates.IssuerParameters{Name: to.Ptr("Self")},
		SecretProperties: &azcertificates.SecretProperties{ContentType: to.Ptr("application/x-pkcs12")},
		X509CertificateProperties: &azcertificates.X509CertificateProperties{Subject: to.Ptr("CN=web.example.com"),
			SubjectAlternativeNames: &azcertificates.SubjectAlternativeNames{DNSNames: []*string{to.Ptr("web.example.com")}}},
	}
	if _, err := cc.CreateCertificate(ctx, "tls", azcertificates.CreateCertificateParameters{CertificatePolicy: policy}, nil); err != nil {
		t.Fatal(err)
	}
	first, err := cc.GetCertificate(ctx, "tls", "", nil)
	if err != nil {
		t.Fatal(err)
	}

	all := objects(
		"objectName: signing\nobjectType: key",
		"objectName: ec-signing\nobjectType: key",
		"objectName: tls\nobjectType: cert\nobjectAlias: tls.crt",
		"objectName: tls\nobjectType: secret\nobjectAlias: tls.pem",
	)
	req := e.request(t, map[string]string{"objects": all}, "kc-0", sp)
	versions, err := e.mount(t, req)
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	got, _ := readFile(t, req.TargetPath, "signing")
	pub, err := x509.ParsePKIXPublicKey(pemBlock(t, got, "PUBLIC KEY"))
	if err != nil || pub.(*rsa.PublicKey).N.Cmp(new(big.Int).SetBytes(rk.Key.N)) != 0 {
		t.Fatalf("signing = %v, %v", pub, err)
	}
	got, _ = readFile(t, req.TargetPath, "ec-signing")
	ecPub, err := x509.ParsePKIXPublicKey(pemBlock(t, got, "PUBLIC KEY"))
	if err != nil {
		t.Fatalf("ec-signing: %v", err)
	}
	if raw, _ := ecPub.(*ecdsa.PublicKey).Bytes(); string(raw) != string(append(append([]byte{4}, ek.Key.X...), ek.Key.Y...)) {
		t.Fatalf("ec-signing = %v, %v", ecPub, err)
	}
	got, _ = readFile(t, req.TargetPath, "tls.crt")
	if strings.Contains(got, "PRIVATE KEY") {
		t.Fatal("tls.crt holds a private key")
	}
	cert, err := x509.ParseCertificate(pemBlock(t, got, "CERTIFICATE"))
	if err != nil || cert.Subject.CommonName != "web.example.com" || string(cert.Raw) != string(first.CER) {
		t.Fatalf("tls.crt = %v, %v", cert, err)
	}
	got, _ = readFile(t, req.TargetPath, "tls.pem")
	if !strings.Contains(got, "PRIVATE KEY-----") || !strings.Contains(got, "BEGIN CERTIFICATE") {
		t.Fatal("tls.pem lacks the key or the certificate")
	}
	if versions["key/signing"] != rk.Key.KID.Version() || versions["cert/tls"] != first.ID.Version() || versions["secret/tls"] != first.ID.Version() {
		t.Fatalf("object versions %v", versions)
	}

	// A new certificate version and a rotated key show at the next mount; objectVersion pins
	// the first; objectVersionHistory writes both, newest first.
	e.clock.Advance(time.Second)
	if _, err := cc.CreateCertificate(ctx, "tls", azcertificates.CreateCertificateParameters{CertificatePolicy: policy}, nil); err != nil {
		t.Fatal(err)
	}
	rotated, err := kc.RotateKey(ctx, "signing", nil)
	if err != nil {
		t.Fatal(err)
	}
	req = e.request(t, map[string]string{"objects": all + strings.TrimPrefix(objects(
		"objectName: tls\nobjectType: cert\nobjectAlias: tls-first.crt\nobjectVersion: "+first.ID.Version(),
		"objectName: tls\nobjectType: cert\nobjectAlias: tls-history\nobjectVersionHistory: 2",
	), "array:\n")}, "kc-1", sp)
	versions, err = e.mount(t, req)
	if err != nil {
		t.Fatalf("mount after rotation: %v", err)
	}
	if versions["key/signing"] != rotated.Key.KID.Version() || versions["cert/tls"] == first.ID.Version() {
		t.Fatalf("versions after rotation %v", versions)
	}
	got, _ = readFile(t, req.TargetPath, "signing")
	if pub, _ := x509.ParsePKIXPublicKey(pemBlock(t, got, "PUBLIC KEY")); pub.(*rsa.PublicKey).N.Cmp(new(big.Int).SetBytes(rotated.Key.N)) != 0 {
		t.Fatal("signing is not the rotated key")
	}
	if got, _ := readFile(t, req.TargetPath, "tls-first.crt"); string(pemBlock(t, got, "CERTIFICATE")) != string(first.CER) {
		t.Fatal("tls-first.crt is not the pinned version")
	}
	newest, _ := readFile(t, req.TargetPath, filepath.Join("tls-history", "0"))
	oldest, _ := readFile(t, req.TargetPath, filepath.Join("tls-history", "1"))
	if string(pemBlock(t, oldest, "CERTIFICATE")) != string(first.CER) || newest == oldest {
		t.Fatal("tls-history is not newest first")
	}

	// A key that does not exist: NotFound naming it, and no files.
	missing := e.request(t, map[string]string{"objects": objects("objectName: nope\nobjectType: key")}, "kc-2", sp)
	_, err = e.mount(t, missing)
	wantStatus(t, err, codes.NotFound, `key "nope"`)
	empty(t, missing.TargetPath)
}
