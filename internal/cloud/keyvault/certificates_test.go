package keyvault_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azcertificates"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	xpkcs12 "golang.org/x/crypto/pkcs12" //nolint:staticcheck // the reader the CSI provider and most clients use
	"software.sslmate.com/src/go-pkcs12"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

func (e *env) certs(t *testing.T, vaultURI string, cred azcore.TokenCredential) *azcertificates.Client {
	t.Helper()
	c, err := azcertificates.NewClient(vaultURI, cred, &azcertificates.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func selfPolicy(subject, contentType string, kty azcertificates.KeyType) *azcertificates.CertificatePolicy {
	return &azcertificates.CertificatePolicy{
		IssuerParameters: &azcertificates.IssuerParameters{Name: to.Ptr("Self")},
		KeyProperties:    &azcertificates.KeyProperties{KeyType: to.Ptr(kty), Exportable: to.Ptr(true)},
		SecretProperties: &azcertificates.SecretProperties{ContentType: to.Ptr(contentType)},
		X509CertificateProperties: &azcertificates.X509CertificateProperties{
			Subject: to.Ptr(subject), ValidityInMonths: to.Ptr[int32](12),
			SubjectAlternativeNames: &azcertificates.SubjectAlternativeNames{DNSNames: []*string{to.Ptr("app.example.com")}},
		},
	}
}

// TestCertificatesSelfSigned creates self-signed certificates through azcertificates and reads
// their key (azkeys) and secret (azsecrets) as Azure's clients do.
func TestCertificatesSelfSigned(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-certs")
	e.assign(t, e.vaultID("kv-certs"), roleKVAdmin, e.s.ObjectID)
	c, kc, sc := e.certs(t, uri, e.owner), e.keys(t, uri, e.owner), e.secrets(t, uri, e.owner)
	ctx := t.Context()

	op, err := c.CreateCertificate(ctx, "web", azcertificates.CreateCertificateParameters{
		CertificatePolicy: selfPolicy("CN=app.example.com, O=Contoso", "application/x-pkcs12", azcertificates.KeyTypeRSA),
		Tags:              map[string]*string{"team": to.Ptr("a")},
	}, nil)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if *op.Status != "completed" || op.ID.Name() != "web" {
		t.Fatalf("operation = %+v", op.CertificateOperation)
	}
	got, err := c.GetCertificate(ctx, "web", "", nil)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	cert, err := x509.ParseCertificate(got.CER)
	if err != nil || cert.Subject.CommonName != "app.example.com" || cert.DNSNames[0] != "app.example.com" || cert.NotAfter.Before(time.Now().AddDate(0, 11, 0)) {
		t.Fatalf("certificate = %v, %v", cert, err)
	}
	if *got.Policy.IssuerParameters.Name != "Self" || *got.Policy.X509CertificateProperties.ValidityInMonths != 12 || *got.Tags["team"] != "a" {
		t.Fatalf("bundle = %+v", got.Certificate)
	}
	version := got.ID.Version()
	if got.KID.Version() != version || got.SID.Version() != version || !strings.HasPrefix(string(*got.KID), uri+"keys/web/") {
		t.Fatalf("kid %s sid %s", *got.KID, *got.SID)
	}

	// The key: the certificate's public key, managed, usable for signing.
	k, err := kc.GetKey(ctx, "web", version, nil)
	if err != nil || !*k.Managed {
		t.Fatalf("key = %+v, %v", k.KeyBundle, err)
	}
	if cert.PublicKey.(*rsa.PublicKey).N.Cmp(new(big.Int).SetBytes(k.Key.N)) != 0 {
		t.Fatal("the key is not the certificate's")
	}
	digest := sha256.Sum256([]byte("x"))
	sig, err := kc.Sign(ctx, "web", "", azkeys.SignParameters{Algorithm: to.Ptr(azkeys.SignatureAlgorithmRS256), Value: digest[:]}, nil)
	if err != nil || rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, digest[:], sig.Result) != nil {
		t.Fatalf("sign with the certificate's key: %v", err)
	}
	// The secret: a PFX without password holding the key and the certificate.
	s, err := sc.GetSecret(ctx, "web", "", nil)
	if err != nil || *s.ContentType != "application/x-pkcs12" || !*s.Managed || string(*s.KID) != string(*got.KID) {
		t.Fatalf("secret = %+v, %v", s.Secret, err)
	}
	pfx, _ := base64.StdEncoding.DecodeString(*s.Value)
	key, leaf, err := xpkcs12.Decode(pfx, "")
	if err != nil || !leaf.Equal(cert) || !key.(*rsa.PrivateKey).PublicKey.Equal(cert.PublicKey) {
		t.Fatalf("PFX secret: %v", err)
	}
	// What a certificate manages cannot be changed on its own.
	_, err = sc.SetSecret(ctx, "web", azsecrets.SetSecretParameters{Value: to.Ptr("x")}, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	_, err = kc.DeleteKey(ctx, "web", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")

	// EC and PEM: the secret is the private key then the certificate, in PEM.
	if _, err := c.CreateCertificate(ctx, "ec-pem", azcertificates.CreateCertificateParameters{
		CertificatePolicy: selfPolicy("CN=ec.example.com", "application/x-pem-file", azcertificates.KeyTypeEC),
	}, nil); err != nil {
		t.Fatalf("create EC: %v", err)
	}
	s, err = sc.GetSecret(ctx, "ec-pem", "", nil)
	if err != nil || *s.ContentType != "application/x-pem-file" {
		t.Fatalf("PEM secret: %v", err)
	}
	b1, rest := pem.Decode([]byte(*s.Value))
	b2, _ := pem.Decode(rest)
	if b1 == nil || b1.Type != "PRIVATE KEY" || b2 == nil || b2.Type != "CERTIFICATE" {
		t.Fatalf("PEM secret blocks: %v %v", b1, b2)
	}

	// A new version; versions list both; policy update applies to the next one.
	if _, err := c.UpdateCertificatePolicy(ctx, "web", azcertificates.CertificatePolicy{
		X509CertificateProperties: &azcertificates.X509CertificateProperties{Subject: to.Ptr("CN=app.example.com"), ValidityInMonths: to.Ptr[int32](3)},
	}, nil); err != nil {
		t.Fatalf("update policy: %v", err)
	}
	pol, err := c.GetCertificatePolicy(ctx, "web", nil)
	if err != nil || *pol.X509CertificateProperties.ValidityInMonths != 3 || *pol.IssuerParameters.Name != "Self" {
		t.Fatalf("policy = %+v, %v", pol, err)
	}
	_, err = c.UpdateCertificatePolicy(ctx, "web", azcertificates.CertificatePolicy{KeyProperties: &azcertificates.KeyProperties{KeyType: to.Ptr(azcertificates.KeyTypeRSA), KeySize: to.Ptr[int32](1000)}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	if _, err := c.CreateCertificate(ctx, "web", azcertificates.CreateCertificateParameters{CertificatePolicy: &pol.CertificatePolicy}, nil); err != nil {
		t.Fatalf("second version: %v", err)
	}
	n := 0
	for p := c.NewListCertificatePropertiesVersionsPager("web", nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Value)
	}
	if n != 2 {
		t.Fatalf("%d versions", n)
	}
	old, err := c.GetCertificate(ctx, "web", version, nil)
	if err != nil || old.ID.Version() != version {
		t.Fatalf("get by version: %v", err)
	}
	if _, err := sc.GetSecret(ctx, "web", version, nil); err != nil {
		t.Fatalf("old secret version: %v", err)
	}

	// Delete takes the key and the secret with it; recover brings them back; purge ends all.
	if _, err := c.DeleteCertificate(ctx, "web", nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = sc.GetSecret(ctx, "web", "", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	if _, err := c.GetDeletedCertificate(ctx, "web", nil); err != nil {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := c.RecoverDeletedCertificate(ctx, "web", nil); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if _, err := sc.GetSecret(ctx, "web", "", nil); err != nil {
		t.Fatalf("secret after recover: %v", err)
	}
	if _, err := c.DeleteCertificate(ctx, "web", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PurgeDeletedCertificate(ctx, "web", nil); err != nil {
		t.Fatalf("purge: %v", err)
	}
	_, err = kc.GetDeletedKey(ctx, "web", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "KeyNotFound")
	if _, err := c.CreateCertificate(ctx, "web", azcertificates.CreateCertificateParameters{CertificatePolicy: &pol.CertificatePolicy}, nil); err != nil {
		t.Fatalf("name reusable after purge: %v", err)
	}

	// Bad policies.
	bad := selfPolicy("not a name", "application/x-pkcs12", azcertificates.KeyTypeRSA)
	_, err = c.CreateCertificate(ctx, "bad", azcertificates.CreateCertificateParameters{CertificatePolicy: bad}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	bad = selfPolicy("CN=x", "application/x-pkcs12", azcertificates.KeyTypeRSA)
	bad.IssuerParameters.Name = to.Ptr("DigiCert")
	_, err = c.CreateCertificate(ctx, "bad", azcertificates.CreateCertificateParameters{CertificatePolicy: bad}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
}

// TestCertificatesMergeAndImport: an Unknown issuer's CSR signed by a CA here and merged; PFX
// and PEM imports, with the refusals of bad input.
func TestCertificatesMergeAndImport(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-certimp")
	e.assign(t, e.vaultID("kv-certimp"), roleKVAdmin, e.s.ObjectID)
	c, sc := e.certs(t, uri, e.owner), e.secrets(t, uri, e.owner)
	ctx := t.Context()
	ca, caKey := testCA(t)

	p := selfPolicy("CN=merged.example.com", "application/x-pem-file", azcertificates.KeyTypeRSA)
	p.IssuerParameters.Name = to.Ptr("Unknown")
	op, err := c.CreateCertificate(ctx, "merged", azcertificates.CreateCertificateParameters{CertificatePolicy: p}, nil)
	if err != nil || *op.Status != "inProgress" || len(op.CSR) == 0 {
		t.Fatalf("create Unknown = %+v, %v", op.CertificateOperation, err)
	}
	pending, err := c.GetCertificateOperation(ctx, "merged", nil)
	if err != nil || *pending.Status != "inProgress" {
		t.Fatalf("pending = %v", err)
	}
	csr, err := x509.ParseCertificateRequest(op.CSR)
	if err != nil || csr.CheckSignature() != nil || csr.Subject.CommonName != "merged.example.com" {
		t.Fatalf("CSR: %v", err)
	}
	// A certificate for another key is refused; the CA's signature of the CSR is merged.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, err = c.MergeCertificate(ctx, "merged", azcertificates.MergeCertificateParameters{X509Certificates: [][]byte{issue(t, ca, caKey, &other.PublicKey)}}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	signed := issue(t, ca, caKey, csr.PublicKey)
	merged, err := c.MergeCertificate(ctx, "merged", azcertificates.MergeCertificateParameters{X509Certificates: [][]byte{signed, ca.Raw}}, nil)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	if leaf, _ := x509.ParseCertificate(merged.CER); leaf.Issuer.CommonName != "Test CA" {
		t.Fatalf("merged certificate issuer %v", leaf.Issuer)
	}
	if op, err := c.GetCertificateOperation(ctx, "merged", nil); err != nil || *op.Status != "completed" {
		t.Fatalf("operation after merge: %v", err)
	}
	s, err := sc.GetSecret(ctx, "merged", "", nil)
	if err != nil || strings.Count(*s.Value, "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("merged secret holds the chain: %v", err)
	}

	// Import a PFX with a password (the modern encryption OpenSSL 3 writes).
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER := issue(t, ca, caKey, &key.PublicKey)
	leaf, _ := x509.ParseCertificate(leafDER)
	pfx, err := pkcs12.Modern.Encode(key, leaf, []*x509.Certificate{ca}, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(pfx)
	_, err = c.ImportCertificate(ctx, "imported", azcertificates.ImportCertificateParameters{Base64EncodedCertificate: to.Ptr(b64), Password: to.Ptr("wrong")}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	_, err = c.ImportCertificate(ctx, "imported", azcertificates.ImportCertificateParameters{Base64EncodedCertificate: to.Ptr(b64[:len(b64)/2])}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")
	imp, err := c.ImportCertificate(ctx, "imported", azcertificates.ImportCertificateParameters{Base64EncodedCertificate: to.Ptr(b64), Password: to.Ptr("s3cret")}, nil)
	if err != nil {
		t.Fatalf("import PFX: %v", err)
	}
	if x, _ := x509.ParseCertificate(imp.CER); !x.Equal(leaf) || *imp.Policy.IssuerParameters.Name != "Unknown" || *imp.Policy.KeyProperties.KeyType != azcertificates.KeyTypeEC {
		t.Fatalf("imported = %+v", imp.Certificate)
	}
	s, err = sc.GetSecret(ctx, "imported", "", nil)
	if err != nil || *s.ContentType != "application/x-pkcs12" {
		t.Fatalf("imported secret: %v", err)
	}
	raw, _ := base64.StdEncoding.DecodeString(*s.Value)
	if blocks, err := xpkcs12.ToPEM(raw, ""); err != nil || len(blocks) != 3 {
		t.Fatalf("imported secret PFX: %d blocks, %v", len(blocks), err)
	}

	// Import PEM: key and certificate in any order.
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemText := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})) + string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if _, err := c.ImportCertificate(ctx, "imported-pem", azcertificates.ImportCertificateParameters{Base64EncodedCertificate: to.Ptr(pemText)}, nil); err != nil {
		t.Fatalf("import PEM: %v", err)
	}
	if s, err := sc.GetSecret(ctx, "imported-pem", "", nil); err != nil || *s.ContentType != "application/x-pem-file" {
		t.Fatalf("PEM import secret: %v", err)
	}
	_, err = c.ImportCertificate(ctx, "bad", azcertificates.ImportCertificateParameters{Base64EncodedCertificate: to.Ptr(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})))}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter") // no private key
}

// TestCertificateRoles: Certificates Officer manages certificates but cannot read their secret
// without a secrets role, as in Azure; a caller without a role gets nothing.
func TestCertificateRoles(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-certroles")
	id := e.vaultID("kv-certroles")
	ctx := t.Context()
	officer, cred := cloudtest.NewPrincipal(t, e.c, "certs-officer")
	_, noneCred := cloudtest.NewPrincipal(t, e.c, "none")
	create := func(c *azcertificates.Client) error {
		_, err := c.CreateCertificate(ctx, "c", azcertificates.CreateCertificateParameters{
			CertificatePolicy: selfPolicy("CN=c", "application/x-pkcs12", azcertificates.KeyTypeEC)}, nil)
		return err
	}
	cloudtest.RespErr(t, create(e.certs(t, uri, noneCred)), http.StatusForbidden, "Forbidden")
	e.assign(t, id, roleCertsOfficer, officer.ObjectID)
	if err := create(e.certs(t, uri, cred)); err != nil {
		t.Fatalf("Certificates Officer create: %v", err)
	}
	_, err := e.secrets(t, uri, cred).GetSecret(ctx, "c", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	_, err = e.certs(t, uri, noneCred).GetCertificate(ctx, "c", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
}

func testCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key
}

func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub crypto.PublicKey) []byte {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "leaf.example.com"}, DNSNames: []string{"leaf.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
