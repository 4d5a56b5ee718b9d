package keyvault

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"software.sslmate.com/src/go-pkcs12"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// certVersion is one version of a certificate: its chain, leaf first. Its key and secret are
// versions of the same id under the same name, written with it.
type certVersion struct {
	ID        string            `json:"id"`
	Chain     [][]byte          `json:"chain"` // DER
	Tags      map[string]string `json:"tags,omitempty"`
	Enabled   bool              `json:"enabled"`
	NotBefore *int64            `json:"nbf,omitempty"`
	Expires   *int64            `json:"exp,omitempty"`
	Created   int64             `json:"created"`
	Updated   int64             `json:"updated"`
}

func (c certVersion) versionID() string { return c.ID }
func (c certVersion) createdAt() int64  { return c.Created }

func (v version) versionID() string { return v.ID }
func (v version) createdAt() int64  { return v.Created }

// pendingOp is a certificate's operation: in progress while an Unknown issuer's CSR waits to be
// merged (the new private key is kept here until then), completed or cancelled after.
type pendingOp struct {
	Issuer        certIssuer        `json:"issuer"`
	Private       []byte            `json:"private,omitempty"`
	CSR           []byte            `json:"csr,omitempty"`
	Status        string            `json:"status"`
	StatusDetails string            `json:"statusDetails,omitempty"`
	Cancelled     bool              `json:"cancelled,omitempty"`
	RequestID     string            `json:"requestId"`
	Tags          map[string]string `json:"tags,omitempty"`
	Enabled       *bool             `json:"enabled,omitempty"`
}

// certStores are the three collections a certificate writes to.
type certStores struct {
	certs   objects[certVersion]
	keys    objects[keyVersion]
	secrets objects[version]
}

func (s *Service) certStores(tx *store.Tx, v Vault) certStores {
	now := s.now().Unix()
	return certStores{
		certs: objects[certVersion]{tx: tx, vault: v, now: now, heads: bucketCertHeads, versionsB: bucketCertVersions,
			extras: []string{bucketCertPolicies, bucketCertPending}, noun: "certificate", code: "CertificateNotFound", title: "Certificate"},
		keys: s.keys(tx, v),
		secrets: objects[version]{tx: tx, vault: v, now: now, heads: bucketHeads, versionsB: bucketVersions,
			noun: "secret", code: "SecretNotFound", title: "Secret"},
	}
}

// freeFor checks that the certificate may write a key and a secret of its name: none exists,
// or the one that does is the certificate's own.
func (cs certStores) freeFor(name string) error {
	if h, ok, err := cs.keys.claim(name); err != nil {
		return err
	} else if ok {
		if k, err := cs.keys.version(h, ""); err == nil && !k.Managed {
			return errorf(http.StatusConflict, "Conflict", "A key named %s exists and is not a certificate's; a certificate needs its name for its key.", h.Name)
		}
	}
	if h, ok, err := cs.secrets.claim(name); err != nil {
		return err
	} else if ok {
		if v, err := cs.secrets.version(h, ""); err == nil && !v.Managed {
			return errorf(http.StatusConflict, "Conflict", "A secret named %s exists and is not a certificate's; a certificate needs its name for its secret.", h.Name)
		}
	}
	return nil
}

// complete writes a new version of the certificate, its key and its secret, all of one id.
func (cs certStores) complete(name string, priv []byte, chain [][]byte, p certPolicy, tags map[string]string, enabled *bool) (head, certVersion, error) {
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return head{}, certVersion{}, errBadParameter("The certificate cannot be parsed.")
	}
	if err := cs.freeFor(name); err != nil {
		return head{}, certVersion{}, err
	}
	h, ok, err := cs.certs.claim(name)
	if err != nil {
		return h, certVersion{}, err
	}
	if !ok {
		h = head{Name: name}
	}
	now := cs.certs.now
	nbf, exp := leaf.NotBefore.Unix(), leaf.NotAfter.Unix()
	c := certVersion{ID: newVersionID(), Chain: chain, Tags: tags, Enabled: enabled == nil || *enabled,
		NotBefore: &nbf, Expires: &exp, Created: now, Updated: now}
	h.Latest = c.ID
	if err := cs.certs.put(h, c); err != nil {
		return h, c, err
	}
	kty := strings.ToUpper(p.KeyProps.Kty)
	k := keyVersion{ID: c.ID, Kty: kty, Ops: certKeyOps(kty), Private: priv, Enabled: c.Enabled,
		NotBefore: &nbf, Expires: &exp, Created: now, Updated: now, Managed: true}
	if err := cs.keys.put(head{Name: name, Latest: c.ID}, k); err != nil {
		return h, c, err
	}
	value, err := secretValue(p, priv, chain)
	if err != nil {
		return h, c, err
	}
	sv := version{ID: c.ID, Value: value, ContentType: p.SecretProps.ContentType, Enabled: c.Enabled,
		NotBefore: &nbf, Expires: &exp, Created: now, Updated: now, Managed: true}
	if err := cs.secrets.put(head{Name: name, Latest: c.ID}, sv); err != nil {
		return h, c, err
	}
	return h, c, cs.putPolicy(name, p)
}

func (cs certStores) putPolicy(name string, p certPolicy) error {
	p.ID = ""
	if p.Attributes.Created == 0 {
		p.Attributes.Created = cs.certs.now
	}
	p.Attributes.Updated = cs.certs.now
	return cs.certs.putExtra(bucketCertPolicies, name, p)
}

func (cs certStores) policy(name string) (certPolicy, bool, error) {
	var p certPolicy
	ok, err := cs.certs.getExtra(bucketCertPolicies, name, &p)
	return p, ok, err
}

// secretValue is the certificate's secret as its policy asks: base64 PFX without a password
// (Key Vault's form) or PEM, private key first. A key that is not exportable is left out.
func secretValue(p certPolicy, priv []byte, chain [][]byte) (string, error) {
	exportable := p.KeyProps.Exportable == nil || *p.KeyProps.Exportable
	certs := make([]*x509.Certificate, len(chain))
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return "", errBadParameter("The certificate chain cannot be parsed.")
		}
		certs[i] = c
	}
	if p.SecretProps.ContentType == ctPEM {
		var b bytes.Buffer
		if exportable {
			_ = pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: priv})
		}
		for _, der := range chain {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
		return b.String(), nil
	}
	var pfx []byte
	var err error
	if exportable {
		key, perr := x509.ParsePKCS8PrivateKey(priv)
		if perr != nil {
			return "", perr
		}
		// LegacyDES with an empty password is what Key Vault's PFX secrets are, and what every
		// PKCS #12 reader (Go's x/crypto included) opens.
		pfx, err = pkcs12.LegacyDES.Encode(key, certs[0], certs[1:], "")
	} else {
		pfx, err = pkcs12.LegacyDES.EncodeTrustStore(certs, "")
	}
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(pfx), nil
}

// newCertKey generates the key a policy asks for.
func newCertKey(p certPolicy) ([]byte, crypto.Signer, error) {
	der, err := generate(strings.ToUpper(p.KeyProps.Kty), p.KeyProps.KeySize, 0, p.KeyProps.Crv)
	if err != nil {
		return nil, nil, err
	}
	s, err := keyVersion{Private: der}.signer()
	return der, s, err
}

// selfSigned issues the certificate of a Self policy.
func selfSigned(p certPolicy, signer crypto.Signer, now time.Time) ([]byte, error) {
	xp := p.X509Props
	subject, err := parseSubject(xp.Subject)
	if err != nil {
		return nil, err
	}
	usage, err := keyUsage(xp.KeyUsage)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject, Issuer: subject,
		NotBefore: now.Add(-5 * time.Minute), NotAfter: now.AddDate(0, xp.ValidityMonths, 0),
		KeyUsage: usage, BasicConstraintsValid: true,
	}
	for _, e := range xp.EKUs {
		oid, _ := parseOID(e)
		tmpl.UnknownExtKeyUsage = append(tmpl.UnknownExtKeyUsage, oid)
	}
	if err := addSANs(tmpl, xp.SANs); err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, signer.Public(), signer)
	if err != nil {
		return nil, errBadParameter("The certificate cannot be issued with this policy.")
	}
	return der, nil
}

func addSANs(tmpl *x509.Certificate, s *certSANs) error {
	if s == nil {
		return nil
	}
	tmpl.DNSNames, tmpl.EmailAddresses = s.DNSNames, s.Emails
	for _, ip := range s.IPAddresses {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	for _, u := range s.URIs {
		pu, err := url.Parse(u)
		if err != nil {
			return errBadParameter("Property 'sans.uris' has an invalid URI.")
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	return nil
}

// csrFor is the signing request of an Unknown issuer's policy.
func csrFor(p certPolicy, signer crypto.Signer) ([]byte, error) {
	subject, err := parseSubject(p.X509Props.Subject)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.CertificateRequest{Subject: subject}
	c := &x509.Certificate{}
	if err := addSANs(c, p.X509Props.SANs); err != nil {
		return nil, err
	}
	tmpl.DNSNames, tmpl.EmailAddresses, tmpl.IPAddresses, tmpl.URIs = c.DNSNames, c.EmailAddresses, c.IPAddresses, c.URIs
	return x509.CreateCertificateRequest(rand.Reader, tmpl, signer)
}

// parseImport reads an imported certificate: PEM text, or base64 PFX opened with pwd. It
// returns the private key (PKCS #8), the chain with the key's certificate first, and the
// content type of the input.
func parseImport(value, pwd string) ([]byte, [][]byte, string, error) {
	if strings.Contains(value, "-----BEGIN") {
		key, chain, err := parsePEMImport([]byte(value))
		return key, chain, ctPEM, err
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(value), ""))
	if err != nil {
		return nil, nil, "", errBadParameter("The specified certificate content is neither PEM nor base64-encoded PFX.")
	}
	key, leaf, cas, err := pkcs12.DecodeChain(der, pwd)
	if errors.Is(err, pkcs12.ErrIncorrectPassword) {
		return nil, nil, "", errBadParameter("The specified PFX password is incorrect.")
	}
	if err != nil {
		return nil, nil, "", errBadParameter("The specified PFX content cannot be read; check that it is a valid PFX file with a private key and a certificate.")
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, "", errBadParameter("The private key of the PFX is of an unsupported type.")
	}
	chain := [][]byte{leaf.Raw}
	for _, c := range cas {
		chain = append(chain, c.Raw)
	}
	return pk, chain, ctPFX, nil
}

func parsePEMImport(data []byte) ([]byte, [][]byte, error) {
	var key crypto.Signer
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, nil, errBadParameter("A CERTIFICATE block of the PEM cannot be parsed.")
			}
			certs = append(certs, c)
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			k, err := parsePrivateKey(b)
			if err != nil {
				return nil, nil, err
			}
			key = k
		case "ENCRYPTED PRIVATE KEY":
			return nil, nil, errBadParameter("Encrypted PEM private keys are not supported; import a PFX with a password instead.")
		}
	}
	if key == nil || len(certs) == 0 {
		return nil, nil, errBadParameter("The specified PEM content must have a private key and its certificate.")
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, errBadParameter("The private key is of an unsupported type.")
	}
	// The key's certificate first, the rest in the order given.
	var chain [][]byte
	for _, c := range certs {
		if samePublic(c.PublicKey, key.Public()) {
			chain = append([][]byte{c.Raw}, chain...)
		} else {
			chain = append(chain, c.Raw)
		}
	}
	if leaf, _ := x509.ParseCertificate(chain[0]); !samePublic(leaf.PublicKey, key.Public()) {
		return nil, nil, errBadParameter("No certificate of the PEM matches its private key.")
	}
	return pk, chain, nil
}

func parsePrivateKey(b *pem.Block) (crypto.Signer, error) {
	var k any
	var err error
	switch b.Type {
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	s, ok := k.(crypto.Signer)
	if err != nil || !ok {
		return nil, errBadParameter("The private key of the PEM cannot be parsed.")
	}
	return s, nil
}

func samePublic(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
