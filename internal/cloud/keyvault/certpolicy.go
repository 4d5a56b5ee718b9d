package keyvault

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// certPolicy is a certificate's policy (CertificatePolicy), stored per name and sent as is.
type certPolicy struct {
	ID              string               `json:"id,omitempty"`
	KeyProps        *certKeyProps        `json:"key_props,omitempty"`
	SecretProps     *certSecretProps     `json:"secret_props,omitempty"`
	X509Props       *certX509Props       `json:"x509_props,omitempty"`
	LifetimeActions []certLifetimeAction `json:"lifetime_actions,omitempty"`
	Issuer          *certIssuer          `json:"issuer,omitempty"`
	Attributes      *certPolicyAttrs     `json:"attributes,omitempty"`
}

type certKeyProps struct {
	Exportable *bool  `json:"exportable,omitempty"`
	Kty        string `json:"kty,omitempty"`
	KeySize    int    `json:"key_size,omitempty"`
	ReuseKey   *bool  `json:"reuse_key,omitempty"`
	Crv        string `json:"crv,omitempty"`
}

type certSecretProps struct {
	ContentType string `json:"contentType,omitempty"`
}

type certX509Props struct {
	Subject        string    `json:"subject,omitempty"`
	SANs           *certSANs `json:"sans,omitempty"`
	EKUs           []string  `json:"ekus,omitempty"`
	KeyUsage       []string  `json:"key_usage,omitempty"`
	ValidityMonths int       `json:"validity_months,omitempty"`
}

type certSANs struct {
	Emails      []string `json:"emails,omitempty"`
	DNSNames    []string `json:"dns_names,omitempty"`
	UPNs        []string `json:"upns,omitempty"`
	IPAddresses []string `json:"ipAddresses,omitempty"`
	URIs        []string `json:"uris,omitempty"`
}

type certLifetimeAction struct {
	Trigger struct {
		LifetimePercentage int `json:"lifetime_percentage,omitempty"`
		DaysBeforeExpiry   int `json:"days_before_expiry,omitempty"`
	} `json:"trigger"`
	Action struct {
		ActionType string `json:"action_type"`
	} `json:"action"`
}

type certIssuer struct {
	Name             string `json:"name,omitempty"`
	CertType         string `json:"cty,omitempty"`
	CertTransparency *bool  `json:"cert_transparency,omitempty"`
}

type certPolicyAttrs struct {
	Enabled *bool `json:"enabled,omitempty"`
	Created int64 `json:"created,omitempty"`
	Updated int64 `json:"updated,omitempty"`
}

// Content types of a certificate's secret.
const (
	ctPFX = "application/x-pkcs12"
	ctPEM = "application/x-pem-file"
)

// withDefaults fills what Key Vault fills in a new policy: an exportable RSA 2048 key, a PFX
// secret, 12 months, and auto-renewal at 80% of the lifetime for self-signed certificates.
func (p certPolicy) withDefaults() certPolicy {
	if p.KeyProps == nil {
		p.KeyProps = &certKeyProps{}
	}
	kp := *p.KeyProps
	if kp.Kty == "" {
		kp.Kty = "RSA"
	}
	if kp.Exportable == nil {
		kp.Exportable = ptr(true)
	}
	if kp.ReuseKey == nil {
		kp.ReuseKey = ptr(false)
	}
	if isEC(strings.ToUpper(kp.Kty)) && kp.Crv == "" {
		kp.Crv = "P-256"
	} else if !isEC(strings.ToUpper(kp.Kty)) && kp.KeySize == 0 {
		kp.KeySize = 2048
	}
	p.KeyProps = &kp
	if p.SecretProps == nil || p.SecretProps.ContentType == "" {
		p.SecretProps = &certSecretProps{ContentType: ctPFX}
	}
	if p.X509Props == nil {
		p.X509Props = &certX509Props{}
	}
	xp := *p.X509Props
	if xp.ValidityMonths == 0 {
		xp.ValidityMonths = 12
	}
	if xp.KeyUsage == nil {
		xp.KeyUsage = []string{"digitalSignature", "keyEncipherment"}
		if isEC(strings.ToUpper(kp.Kty)) {
			xp.KeyUsage = []string{"digitalSignature"}
		}
	}
	if xp.EKUs == nil {
		xp.EKUs = []string{"1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"}
	}
	p.X509Props = &xp
	if p.LifetimeActions == nil && p.Issuer != nil && strings.EqualFold(p.Issuer.Name, "Self") {
		a := certLifetimeAction{}
		a.Trigger.LifetimePercentage = 80
		a.Action.ActionType = "AutoRenew"
		p.LifetimeActions = []certLifetimeAction{a}
	}
	if p.Attributes == nil {
		p.Attributes = &certPolicyAttrs{}
	}
	if p.Attributes.Enabled == nil {
		p.Attributes.Enabled = ptr(true)
	}
	return p
}

// check validates a policy for creating a certificate with it.
func (p certPolicy) check(v Vault) error {
	if p.Issuer == nil || p.Issuer.Name == "" {
		return errBadParameter("Property 'policy.issuer.name' is required; use Self or Unknown.")
	}
	if !strings.EqualFold(p.Issuer.Name, "Self") && !strings.EqualFold(p.Issuer.Name, "Unknown") {
		return errorf(400, "BadParameter", "Issuer %s is not known to this vault; the local Key Vault issues with Self and Unknown.", clip(p.Issuer.Name, 64))
	}
	kty, err := checkKty(v, p.KeyProps.Kty)
	if err != nil {
		return err
	}
	if isEC(kty) {
		if _, err := curveOf(p.KeyProps.Crv); err != nil {
			return err
		}
	} else if s := p.KeyProps.KeySize; s != 2048 && s != 3072 && s != 4096 {
		return errBadParameter("Property 'key_props.key_size' must be 2048, 3072 or 4096.")
	}
	switch p.SecretProps.ContentType {
	case ctPFX, ctPEM:
	default:
		return errBadParameter("Property 'secret_props.contentType' must be %s or %s.", ctPFX, ctPEM)
	}
	xp := p.X509Props
	if xp.ValidityMonths < 1 || xp.ValidityMonths > 1200 {
		return errBadParameter("Property 'x509_props.validity_months' must be between 1 and 1200.")
	}
	if _, err := parseSubject(xp.Subject); err != nil {
		return err
	}
	if xp.Subject == "" && (xp.SANs == nil || len(xp.SANs.DNSNames)+len(xp.SANs.Emails)+len(xp.SANs.IPAddresses)+len(xp.SANs.URIs) == 0) {
		return errBadParameter("Property 'x509_props.subject' or a subject alternative name is required.")
	}
	if _, err := keyUsage(xp.KeyUsage); err != nil {
		return err
	}
	for _, e := range xp.EKUs {
		if _, err := parseOID(e); err != nil {
			return errBadParameter("Property 'x509_props.ekus' has an invalid OID: %s.", clip(e, 64))
		}
	}
	if xp.SANs != nil {
		for _, ip := range xp.SANs.IPAddresses {
			if net.ParseIP(ip) == nil {
				return errBadParameter("Property 'sans.ipAddresses' has an invalid address: %s.", clip(ip, 64))
			}
		}
		for _, u := range xp.SANs.URIs {
			if _, err := url.Parse(u); err != nil {
				return errBadParameter("Property 'sans.uris' has an invalid URI.")
			}
		}
	}
	return nil
}

// merge applies a PATCH of the policy: each section sent replaces the stored one.
func (p certPolicy) merge(u certPolicy) certPolicy {
	if u.KeyProps != nil {
		p.KeyProps = u.KeyProps
	}
	if u.SecretProps != nil {
		p.SecretProps = u.SecretProps
	}
	if u.X509Props != nil {
		p.X509Props = u.X509Props
	}
	if u.LifetimeActions != nil {
		p.LifetimeActions = u.LifetimeActions
	}
	if u.Issuer != nil {
		p.Issuer = u.Issuer
	}
	if u.Attributes != nil && u.Attributes.Enabled != nil {
		p.Attributes.Enabled = u.Attributes.Enabled
	}
	return p
}

var subjectAttrs = map[string]asn1.ObjectIdentifier{
	"CN": {2, 5, 4, 3}, "O": {2, 5, 4, 10}, "OU": {2, 5, 4, 11}, "L": {2, 5, 4, 7},
	"S": {2, 5, 4, 8}, "ST": {2, 5, 4, 8}, "C": {2, 5, 4, 6}, "E": {1, 2, 840, 113549, 1, 9, 1},
	"STREET": {2, 5, 4, 9}, "SERIALNUMBER": {2, 5, 4, 5},
}

// parseSubject reads an X.500 name as Key Vault takes it: "CN=name, O=org".
func parseSubject(s string) (pkix.Name, error) {
	var n pkix.Name
	if strings.TrimSpace(s) == "" {
		return n, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		oid, known := subjectAttrs[strings.ToUpper(strings.TrimSpace(k))]
		if !ok || !known || strings.TrimSpace(val) == "" {
			return n, errBadParameter("Property 'x509_props.subject' is not an X.500 name such as CN=example.com, O=Contoso.")
		}
		n.ExtraNames = append(n.ExtraNames, pkix.AttributeTypeAndValue{Type: oid, Value: strings.TrimSpace(val)})
	}
	return n, nil
}

var keyUsages = map[string]x509.KeyUsage{
	"digitalsignature": x509.KeyUsageDigitalSignature, "nonrepudiation": x509.KeyUsageContentCommitment,
	"keyencipherment": x509.KeyUsageKeyEncipherment, "dataencipherment": x509.KeyUsageDataEncipherment,
	"keyagreement": x509.KeyUsageKeyAgreement, "keycertsign": x509.KeyUsageCertSign,
	"crlsign": x509.KeyUsageCRLSign, "encipheronly": x509.KeyUsageEncipherOnly, "decipheronly": x509.KeyUsageDecipherOnly,
}

// keyUsageNames are the key_usage values as Key Vault spells them.
var keyUsageNames = []string{"digitalSignature", "nonRepudiation", "keyEncipherment", "dataEncipherment",
	"keyAgreement", "keyCertSign", "cRLSign", "encipherOnly", "decipherOnly"}

func keyUsage(names []string) (x509.KeyUsage, error) {
	var u x509.KeyUsage
	for _, n := range names {
		k, ok := keyUsages[strings.ToLower(n)]
		if !ok {
			return 0, errBadParameter("Property 'x509_props.key_usage' has an invalid value: %s.", clip(n, 32))
		}
		u |= k
	}
	return u, nil
}

func parseOID(s string) (asn1.ObjectIdentifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(s) > 128 {
		return nil, errBadParameter("invalid OID")
	}
	oid := make(asn1.ObjectIdentifier, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, errBadParameter("invalid OID")
		}
		oid[i] = n
	}
	return oid, nil
}

// certKeyOps are the key_ops of a certificate's key, from its type.
func certKeyOps(kty string) []string { return defaultOps(kty) }

// policyFromCert is the policy Key Vault derives for an imported certificate.
func policyFromCert(c *x509.Certificate, contentType string) certPolicy {
	p := certPolicy{
		SecretProps: &certSecretProps{ContentType: contentType},
		X509Props:   &certX509Props{Subject: c.Subject.String(), ValidityMonths: max(1, int(c.NotAfter.Sub(c.NotBefore).Hours()/24/30))},
		Issuer:      &certIssuer{Name: "Unknown"},
	}
	kp := &certKeyProps{Exportable: ptr(true), ReuseKey: ptr(false)}
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		kp.Kty, kp.KeySize = "RSA", k.N.BitLen()
	case *ecdsa.PublicKey:
		kp.Kty, kp.Crv = "EC", k.Curve.Params().Name
	}
	p.KeyProps = kp
	if len(c.DNSNames)+len(c.EmailAddresses) > 0 {
		p.X509Props.SANs = &certSANs{DNSNames: c.DNSNames, Emails: c.EmailAddresses}
	}
	for _, name := range keyUsageNames {
		if c.KeyUsage&keyUsages[strings.ToLower(name)] != 0 {
			p.X509Props.KeyUsage = append(p.X509Props.KeyUsage, name)
		}
	}
	return p.withDefaults()
}
