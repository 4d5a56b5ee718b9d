package msi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/arm/compute"
	"github.com/cerulean/cerulean/internal/fsutil"
)

// The identity header (X-IDENTITY-HEADER, the IDENTITY_HEADER variable) names one compute
// resource and proves that whoever holds it was given it for that resource:
//
//	v1.<base64url(resource id)>.<base64url(HMAC-SHA256(key, lower-case resource id))>
//
// The key lives in the data directory, so `cerulean-local cloud env --compute` can derive a header
// while the cloud runs (its state file is locked) and headers survive restarts. Nothing is
// stored per resource: a header works for as long as the resource exists.

// ConfigFile is the data directory's file with the header key and the endpoints (0600).
const ConfigFile = "msi.json"

const headerVersion = "v1"

// ErrBadHeader is returned for an identity header that is missing, malformed or not ours.
var ErrBadHeader = errors.New("invalid identity header")

// Secrets makes and checks identity headers.
type Secrets struct{ key []byte }

// NewSecrets uses key (at least 32 bytes).
func NewSecrets(key []byte) (*Secrets, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("identity header key: %d bytes, want at least 32", len(key))
	}
	return &Secrets{key: key}, nil
}

func (s *Secrets) mac(id armid.ID) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("cerulean-msi-" + headerVersion + "\x00" + id.Key()))
	return m.Sum(nil)
}

// Header is the identity header of the compute resource id.
func (s *Secrets) Header(id armid.ID) string {
	enc := base64.RawURLEncoding
	return headerVersion + "." + enc.EncodeToString([]byte(id.String())) + "." + enc.EncodeToString(s.mac(id))
}

// Resource returns the compute resource a header names, or ErrBadHeader. The error never
// contains the header.
func (s *Secrets) Resource(header string) (armid.ID, error) {
	if header == "" || len(header) > 4096 {
		return armid.ID{}, ErrBadHeader
	}
	parts := strings.Split(header, ".")
	if len(parts) != 3 || parts[0] != headerVersion {
		return armid.ID{}, ErrBadHeader
	}
	enc := base64.RawURLEncoding
	raw, err1 := enc.DecodeString(parts[1])
	sum, err2 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil {
		return armid.ID{}, ErrBadHeader
	}
	id, err := armid.Parse(string(raw))
	if err != nil || compute.CheckComputeID(id) != nil {
		return armid.ID{}, ErrBadHeader
	}
	if !hmac.Equal(sum, s.mac(id)) {
		return armid.ID{}, ErrBadHeader
	}
	return id, nil
}

// config is ConfigFile's content.
type config struct {
	Key          []byte `json:"key"`
	Endpoint     string `json:"endpoint"`     // App Service style: IDENTITY_ENDPOINT
	IMDSEndpoint string `json:"imdsEndpoint"` // IMDS style
	CAFile       string `json:"caFile"`
}

// Paths of the endpoints on the cloud's origin.
const (
	AppServicePath = "/msi/token"
	IMDSPath       = "/metadata/identity/oauth2/token"
)

// Setup loads the header key from dataDir (creating it on first use) and records where the
// endpoints are served now, for ComputeEnv.
func Setup(dataDir, baseURL, caFile string) (*Secrets, error) {
	path := filepath.Join(dataDir, ConfigFile)
	var c config
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("read %s: %w", ConfigFile, err)
		}
	case errors.Is(err, os.ErrNotExist):
	default:
		return nil, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	if len(c.Key) == 0 {
		c.Key = make([]byte, 32)
		if _, err := rand.Read(c.Key); err != nil {
			return nil, fmt.Errorf("make identity header key: %w", err)
		}
	}
	base := strings.TrimSuffix(baseURL, "/")
	c.Endpoint, c.IMDSEndpoint, c.CAFile = base+AppServicePath, base+IMDSPath, caFile
	out, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", ConfigFile, err)
	}
	if err := fsutil.WriteFileAtomic(path, out, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", ConfigFile, err)
	}
	return NewSecrets(c.Key)
}

// ComputeEnv returns what code on the compute resource needs to get its identities' tokens:
// IDENTITY_ENDPOINT, IDENTITY_HEADER and SSL_CERT_FILE, and nothing else. It reads only
// ConfigFile, so it works while the cloud runs; it does not check that the resource exists.
func ComputeEnv(dataDir, resourceID string) ([][2]string, error) {
	id, err := armid.Parse(resourceID)
	if err != nil {
		return nil, fmt.Errorf("parse compute resource id: %w", err)
	}
	if err := compute.CheckComputeID(id); err != nil {
		return nil, fmt.Errorf("compute resource id: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no cloud has started with data dir %s: %w", dataDir, err)
	} else if err != nil {
		return nil, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	s, err := NewSecrets(c.Key)
	if err != nil {
		return nil, err
	}
	return [][2]string{
		{"IDENTITY_ENDPOINT", c.Endpoint},
		{"IDENTITY_HEADER", s.Header(id)},
		{"SSL_CERT_FILE", c.CAFile},
	}, nil
}
