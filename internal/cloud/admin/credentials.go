package admin

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/pki"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// Validity bounds of issued identity credentials, and the default: Azure's managed-identity
// data plane issues certificates for 90 days.
const (
	DefaultCredentialValidity = 90 * 24 * time.Hour
	minCredentialValidity     = time.Hour
	maxCredentialValidity     = 365 * 24 * time.Hour
)

// IssueCredentialsRequest is the optional body of POST /principals/{clientId}/credentials.
type IssueCredentialsRequest struct {
	// Validity is a Go duration ("2160h"); DefaultCredentialValidity when empty.
	Validity string `json:"validity,omitempty"`
}

func (a *API) registerCredentials(mux *http.ServeMux, h func(httpx.Handler) http.Handler) {
	if a.o.CA == nil {
		return
	}
	mux.Handle("POST "+Prefix+"/principals/{clientId}/credentials", h(a.issueCredentials))
}

// issueCredentials issues a managed identity's credentials as HyperShift's
// UserAssignedIdentityCredentials JSON, the way Azure's managed-identity data plane hands them
// to a hosted control plane: a new RSA key and a certificate for it signed by the cloud's CA,
// registered on the identity's principal (so it authenticates with a client-certificate
// assertion that sends the chain), in a PEM bundle of certificate, CA and key. The answer holds
// the private key and is never logged.
func (a *API) issueCredentials(r *http.Request) (httpx.Response, error) {
	var req IssueCredentialsRequest
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return httpx.Response{}, err
		}
	}
	validity := DefaultCredentialValidity
	if req.Validity != "" {
		d, err := time.ParseDuration(req.Validity)
		if err != nil || d < minCredentialValidity || d > maxCredentialValidity {
			return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "validity must be a duration from 1h to 8760h."}
		}
		validity = d
	}
	ctx := r.Context()
	p, err := a.o.Entra.Directory.Principal(ctx, a.o.TenantID, r.PathValue("clientId"))
	if err != nil {
		return httpx.Response{}, err
	}
	if p.Kind != entra.KindManagedIdentity {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "Credentials are issued to managed identities only."}
	}
	now := a.o.Clock().UTC().Truncate(time.Second)
	key, err := rsa.GenerateKey(rand.Reader, 2048) // azidentity's certificate credential takes RSA keys only
	if err != nil {
		return httpx.Response{}, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: pki.Serial(), Subject: pkix.Name{CommonName: p.ClientID},
		NotBefore: now, NotAfter: now.Add(validity), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.o.CA.Cert, &key.PublicKey, a.o.CA.Key)
	if err != nil {
		return httpx.Response{}, fmt.Errorf("sign identity certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return httpx.Response{}, fmt.Errorf("parse identity certificate: %w", err)
	}
	if _, err := a.o.Entra.Directory.AddCertificate(ctx, a.o.TenantID, p.ClientID, leaf); err != nil {
		return httpx.Response{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return httpx.Response{}, fmt.Errorf("encode key: %w", err)
	}
	bundle := append(pki.EncodeCert(der), a.o.CA.PEM()...)
	bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	return httpx.Response{Status: http.StatusCreated, Body: hcpcredentials.File{
		AuthenticationEndpoint: a.o.AuthorityHost,
		ClientID:               p.ClientID,
		ClientSecret:           base64.StdEncoding.EncodeToString(bundle),
		TenantID:               p.TenantID,
		ObjectID:               p.ObjectID,
		NotBefore:              now,
		NotAfter:               now.Add(validity),
		RenewAfter:             now.Add(validity / 2),
		CannotRenewAfter:       now.Add(validity * 9 / 10),
	}}, nil
}
