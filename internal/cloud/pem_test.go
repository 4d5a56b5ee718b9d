package cloud_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/pki"
)

func pemEncode(w io.Writer, der []byte) error {
	return pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func selfSignedCert(cn string) (*x509.Certificate, []byte, error) {
	return pki.SelfSigned(cn, time.Now())
}

func base64Decode(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
