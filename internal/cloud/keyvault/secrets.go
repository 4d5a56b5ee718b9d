package keyvault

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Secrets are kept in two buckets: a head per name ("{vault}/{name}", lower case) that knows the
// latest version and the soft-delete state, and the versions ("{vault}/{name}/{version}").
const (
	bucketHeads    = "keyvault.secrets"
	bucketVersions = "keyvault.versions"
)

// head is a secret name's state.
type head struct {
	Name    string `json:"name"` // creation case
	Latest  string `json:"latest"`
	Deleted int64  `json:"deleted,omitempty"` // Unix seconds; 0 while active
	PurgeAt int64  `json:"purgeAt,omitempty"`
}

// version is one version of a secret.
type version struct {
	ID          string            `json:"id"`
	Value       string            `json:"value"`
	ContentType string            `json:"contentType,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Enabled     bool              `json:"enabled"`
	NotBefore   *int64            `json:"nbf,omitempty"`
	Expires     *int64            `json:"exp,omitempty"`
	Created     int64             `json:"created"`
	Updated     int64             `json:"updated"`
	// Managed is set on the secret behind a certificate (its PFX or PEM); it changes only
	// through the certificate; its kid is the certificate's key of the same version.
	Managed bool `json:"managed,omitempty"`
}

func headKey(vault, name string) string { return vaultKey(vault) + "/" + strings.ToLower(name) }

func versionKey(vault, name, id string) string { return headKey(vault, name) + "/" + id }

// secrets is the store-level view of one vault's secrets at one instant.
type secrets struct {
	tx    *store.Tx
	vault Vault
	now   int64
}

func (s secrets) head(name string) (head, bool, error) {
	var h head
	err := s.tx.Get(bucketHeads, headKey(s.vault.Name, name), &h)
	if errors.Is(err, store.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if h.Deleted != 0 && h.PurgeAt != 0 && s.now >= h.PurgeAt {
		// Past its scheduled purge date: gone, as if the purge had run (writers purge it).
		return h, false, nil
	}
	return h, true, nil
}

// claim makes a name free for a new secret: a soft-deleted one past its purge date is purged
// now; one still recoverable is a conflict.
func (s secrets) claim(name string) (head, bool, error) {
	h, ok, err := s.head(name)
	if err != nil || ok {
		return h, ok, err
	}
	return h, false, s.purge(name)
}

// active returns the head of a secret that exists and is not deleted.
func (s secrets) active(name string) (head, error) {
	h, ok, err := s.head(name)
	if err != nil {
		return h, err
	}
	if !ok || h.Deleted != 0 {
		return h, errSecretNotFound(name)
	}
	return h, nil
}

// deleted returns the head of a soft-deleted secret.
func (s secrets) deleted(name string) (head, error) {
	h, ok, err := s.head(name)
	if err != nil {
		return h, err
	}
	if !ok || h.Deleted == 0 {
		return h, errDeletedNotFound(name)
	}
	return h, nil
}

func (s secrets) version(h head, id string) (version, error) {
	if id == "" {
		id = h.Latest
	}
	var v version
	err := s.tx.Get(bucketVersions, versionKey(s.vault.Name, h.Name, id), &v)
	if errors.Is(err, store.ErrNotFound) {
		return v, errVersionNotFound(h.Name, id)
	}
	return v, err
}

func (s secrets) versions(h head) ([]version, error) {
	var out []version
	err := s.tx.ForEach(bucketVersions, headKey(s.vault.Name, h.Name)+"/", func(_ string, decode func(any) error) error {
		var v version
		if err := decode(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// set writes a new version, creating the name if needed.
func (s secrets) set(name string, b setBody) (head, version, error) {
	h, ok, err := s.claim(name)
	if err != nil {
		return h, version{}, err
	}
	if ok && h.Deleted != 0 {
		return h, version{}, errDeletedButRecoverable(h.Name)
	}
	if err := s.unmanaged(h, ok); err != nil {
		return h, version{}, err
	}
	if !ok {
		h = head{Name: name}
	}
	v := version{ID: newVersionID(), Value: *b.Value, Enabled: true, Tags: b.Tags, Created: s.now, Updated: s.now}
	if b.ContentType != nil {
		v.ContentType = *b.ContentType
	}
	applyAttributes(&v, b.Attributes)
	h.Latest = v.ID
	return h, v, s.put(h, v)
}

// unmanaged refuses a new version of a certificate's secret.
func (s secrets) unmanaged(h head, exists bool) error {
	if !exists {
		return nil
	}
	if v, err := s.version(h, ""); err == nil && v.Managed {
		return errManaged("secret", h.Name)
	}
	return nil
}

func (s secrets) put(h head, vs ...version) error {
	for _, v := range vs {
		if err := s.tx.Put(bucketVersions, versionKey(s.vault.Name, h.Name, v.ID), v); err != nil {
			return err
		}
	}
	return s.tx.Put(bucketHeads, headKey(s.vault.Name, h.Name), h)
}

func applyAttributes(v *version, a *attributesIn) {
	if a == nil {
		return
	}
	if a.Enabled != nil {
		v.Enabled = *a.Enabled
	}
	if a.NotBefore != nil {
		v.NotBefore = a.NotBefore
	}
	if a.Expires != nil {
		v.Expires = a.Expires
	}
}

// update changes a version's content type, attributes and tags; the value stays.
func (s secrets) update(name, id string, b updateBody) (head, version, error) {
	h, err := s.active(name)
	if err != nil {
		return h, version{}, err
	}
	v, err := s.version(h, id)
	if err != nil {
		return h, v, err
	}
	if v.Managed {
		return h, v, errManaged("secret", h.Name)
	}
	if b.ContentType != nil {
		v.ContentType = *b.ContentType
	}
	applyAttributes(&v, b.Attributes)
	if v.NotBefore != nil && v.Expires != nil && *v.Expires <= *v.NotBefore {
		return h, v, errBadParameter("Property 'attributes.exp' must be later than 'attributes.nbf'.")
	}
	if b.Tags != nil {
		v.Tags = b.Tags
	}
	v.Updated = s.now
	return h, v, s.tx.Put(bucketVersions, versionKey(s.vault.Name, h.Name, v.ID), v)
}

// softDelete marks the name deleted; without soft delete on the vault it purges at once.
func (s secrets) softDelete(name string) (head, version, error) {
	h, err := s.active(name)
	if err != nil {
		return h, version{}, err
	}
	v, err := s.version(h, "")
	if err != nil {
		return h, v, err
	}
	if v.Managed {
		return h, v, errManaged("secret", h.Name)
	}
	if !s.vault.SoftDelete {
		return h, v, s.purge(name)
	}
	h.Deleted = s.now
	h.PurgeAt = time.Unix(s.now, 0).AddDate(0, 0, s.vault.RetentionDays).Unix()
	return h, v, s.tx.Put(bucketHeads, headKey(s.vault.Name, h.Name), h)
}

func (s secrets) recover(name string) (head, version, error) {
	h, err := s.deleted(name)
	if err != nil {
		return h, version{}, err
	}
	h.Deleted, h.PurgeAt = 0, 0
	v, err := s.version(h, "")
	if err != nil {
		return h, v, err
	}
	return h, v, s.tx.Put(bucketHeads, headKey(s.vault.Name, h.Name), h)
}

func (s secrets) purge(name string) error {
	if err := deletePrefix(s.tx, bucketVersions, headKey(s.vault.Name, name)+"/"); err != nil {
		return err
	}
	return s.tx.Delete(bucketHeads, headKey(s.vault.Name, name))
}

// page lists heads after the skip token: active ones, or deleted ones.
func (s secrets) page(deleted bool, after string, limit int) ([]head, string, error) {
	return s.pageOf(bucketHeads, deleted, after, limit)
}

// pageOf pages the heads of one bucket (secrets', keys' or certificates').
func (s secrets) pageOf(bucket string, deleted bool, after string, limit int) ([]head, string, error) {
	var out []head
	more := false
	prefix := vaultKey(s.vault.Name) + "/"
	err := s.tx.ForEach(bucket, prefix, func(k string, decode func(any) error) error {
		if more || strings.ToLower(k[len(prefix):]) <= after {
			return nil
		}
		var h head
		if err := decode(&h); err != nil {
			return err
		}
		switch {
		case h.Deleted != 0 && h.PurgeAt != 0 && s.now >= h.PurgeAt:
			return nil // past its purge date
		case (h.Deleted != 0) != deleted:
			return nil
		case len(out) == limit:
			more = true
			return nil
		}
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more {
		next = strings.ToLower(out[len(out)-1].Name)
	}
	return out, next, nil
}

// sortedVersions orders versions oldest first, then by id, for stable paging.
func sortedVersions(vs []version) []version {
	slices.SortFunc(vs, func(a, b version) int {
		if a.Created != b.Created {
			return cmp.Compare(a.Created, b.Created)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return vs
}

// backupOf is what a backup holds: every version of a name.
type backupOf struct {
	Name     string    `json:"name"`
	Latest   string    `json:"latest"`
	Versions []version `json:"versions"`
}

func (s secrets) backup(name string) (backupOf, error) {
	h, err := s.active(name)
	if err != nil {
		return backupOf{}, err
	}
	vs, err := s.versions(h)
	if err != nil {
		return backupOf{}, err
	}
	return backupOf{Name: h.Name, Latest: h.Latest, Versions: vs}, nil
}

func (s secrets) restore(b backupOf) (head, version, error) {
	h, ok, err := s.claim(b.Name)
	if err != nil {
		return h, version{}, err
	}
	if ok {
		return h, version{}, errorf(http.StatusConflict, "Conflict", "Secret %s already exists in this vault.", h.Name)
	}
	h = head{Name: b.Name, Latest: b.Latest}
	var latest version
	for _, v := range b.Versions {
		if v.ID == b.Latest {
			latest = v
		}
	}
	return h, latest, s.put(h, b.Versions...)
}

func newVersionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}
