package csiprovider

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/pkcs12" //nolint:staticcheck // Key Vault's PFX secrets are the legacy format this package reads
)

// Content types of a secret that backs a Key Vault certificate.
const (
	contentTypePEM = "application/x-pem-file"
	contentTypePFX = "application/x-pkcs12"
)

// certificateSecret converts the secret behind a certificate as upstream does: PEM stays PEM; a
// PFX is written as PEM (private key and certificates) unless objectFormat is pfx.
func certificateSecret(value string, contentType *string, o Object) (string, error) {
	ct := ""
	if contentType != nil {
		ct = *contentType
	}
	switch ct {
	case contentTypePEM:
		return value, nil
	case contentTypePFX:
		if o.ObjectFormat == FormatPFX {
			return value, nil
		}
		der, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return "", errors.New("the PFX is not base64")
		}
		blocks, err := pkcs12.ToPEM(der, "")
		if err != nil {
			return "", fmt.Errorf("read PFX: %w", err)
		}
		var out []byte
		for _, b := range blocks {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: b.Bytes})...)
		}
		return string(out), nil
	}
	return "", fmt.Errorf("unknown certificate content type %q", ct)
}
