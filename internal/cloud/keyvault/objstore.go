package keyvault

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Keys and certificates are kept as secrets are (secrets.go): a head per name and its versions,
// plus per-name documents (a key's rotation policy, a certificate's policy and pending
// operation) that live and die with the name.
const (
	bucketKeyHeads     = "keyvault.keys"
	bucketKeyVersions  = "keyvault.keyVersions"
	bucketKeyPolicies  = "keyvault.keyRotationPolicies"
	bucketCertHeads    = "keyvault.certificates"
	bucketCertVersions = "keyvault.certificateVersions"
	bucketCertPolicies = "keyvault.certificatePolicies"
	bucketCertPending  = "keyvault.certificatePending"
)

// objectBuckets are every bucket keyed by "{vault}/..." besides the secrets' own; a purged vault
// loses them all.
var objectBuckets = []string{
	bucketKeyHeads, bucketKeyVersions, bucketKeyPolicies,
	bucketCertHeads, bucketCertVersions, bucketCertPolicies, bucketCertPending,
}

// versioned is a stored version of a key or certificate.
type versioned interface {
	versionID() string
	createdAt() int64
}

// objects is the store-level view of one vault's keys or certificates at one instant.
type objects[V versioned] struct {
	tx                *store.Tx
	vault             Vault
	now               int64
	heads, versionsB  string
	extras            []string // per-name buckets
	noun, code, title string   // "key", "KeyNotFound", "Key" in errors
}

func (o objects[V]) hkey(name string) string { return headKey(o.vault.Name, name) }

func (o objects[V]) errNotFound(name string) *Error {
	return errorf(http.StatusNotFound, o.code,
		"A %s with (name/id) %s was not found in this key vault. If you recently deleted this %s you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182", o.noun, name, o.noun)
}

func (o objects[V]) head(name string) (head, bool, error) {
	var h head
	err := o.tx.Get(o.heads, o.hkey(name), &h)
	if errors.Is(err, store.ErrNotFound) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if h.Deleted != 0 && h.PurgeAt != 0 && o.now >= h.PurgeAt {
		return h, false, nil // past its purge date: gone
	}
	return h, true, nil
}

// claim makes a name free for a new object, as secrets.claim does.
func (o objects[V]) claim(name string) (head, bool, error) {
	h, ok, err := o.head(name)
	if err != nil || ok {
		if ok && h.Deleted != 0 {
			return h, ok, errorf(http.StatusConflict, "Conflict",
				"%s %s is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the %s can only be recovered or purged.", o.title, h.Name, o.noun).
				inner("ObjectIsDeletedButRecoverable")
		}
		return h, ok, err
	}
	return h, false, o.purge(name)
}

func (o objects[V]) active(name string) (head, error) {
	h, ok, err := o.head(name)
	if err != nil {
		return h, err
	}
	if !ok || h.Deleted != 0 {
		return h, o.errNotFound(name)
	}
	return h, nil
}

func (o objects[V]) deleted(name string) (head, error) {
	h, ok, err := o.head(name)
	if err != nil {
		return h, err
	}
	if !ok || h.Deleted == 0 {
		return h, errorf(http.StatusNotFound, o.code, "Deleted %s not found: %s", o.title, name)
	}
	return h, nil
}

func (o objects[V]) version(h head, id string) (V, error) {
	if id == "" {
		id = h.Latest
	}
	var v V
	err := o.tx.Get(o.versionsB, o.hkey(h.Name)+"/"+id, &v)
	if errors.Is(err, store.ErrNotFound) {
		return v, errorf(http.StatusNotFound, o.code,
			"A %s with (name/id) %s/%s was not found in this key vault. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182", o.noun, h.Name, id)
	}
	return v, err
}

// versions returns every version, oldest first.
func (o objects[V]) versions(h head) ([]V, error) {
	var out []V
	err := o.tx.ForEach(o.versionsB, o.hkey(h.Name)+"/", func(_ string, decode func(any) error) error {
		var v V
		if err := decode(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	slices.SortFunc(out, func(a, b V) int {
		if c := cmp.Compare(a.createdAt(), b.createdAt()); c != 0 {
			return c
		}
		return strings.Compare(a.versionID(), b.versionID())
	})
	return out, err
}

func (o objects[V]) put(h head, vs ...V) error {
	for _, v := range vs {
		if err := o.tx.Put(o.versionsB, o.hkey(h.Name)+"/"+v.versionID(), v); err != nil {
			return err
		}
	}
	return o.tx.Put(o.heads, o.hkey(h.Name), h)
}

// putVersion writes one version without touching the head (an update of attributes).
func (o objects[V]) putVersion(h head, v V) error {
	return o.tx.Put(o.versionsB, o.hkey(h.Name)+"/"+v.versionID(), v)
}

func (o objects[V]) getExtra(bucket, name string, v any) (bool, error) {
	err := o.tx.Get(bucket, o.hkey(name), v)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (o objects[V]) putExtra(bucket, name string, v any) error {
	return o.tx.Put(bucket, o.hkey(name), v)
}

func (o objects[V]) deleteExtra(bucket, name string) error {
	return o.tx.Delete(bucket, o.hkey(name))
}

// softDelete marks the name deleted; without soft delete on the vault it purges at once.
func (o objects[V]) softDelete(name string) (head, V, error) {
	var zero V
	h, err := o.active(name)
	if err != nil {
		return h, zero, err
	}
	v, err := o.version(h, "")
	if err != nil {
		return h, v, err
	}
	if !o.vault.SoftDelete {
		return h, v, o.purge(name)
	}
	h.Deleted = o.now
	h.PurgeAt = time.Unix(o.now, 0).AddDate(0, 0, o.vault.RetentionDays).Unix()
	return h, v, o.tx.Put(o.heads, o.hkey(h.Name), h)
}

func (o objects[V]) recover(name string) (head, V, error) {
	var zero V
	h, err := o.deleted(name)
	if err != nil {
		return h, zero, err
	}
	h.Deleted, h.PurgeAt = 0, 0
	v, err := o.version(h, "")
	if err != nil {
		return h, v, err
	}
	return h, v, o.tx.Put(o.heads, o.hkey(h.Name), h)
}

func (o objects[V]) purge(name string) error {
	if err := deletePrefix(o.tx, o.versionsB, o.hkey(name)+"/"); err != nil {
		return err
	}
	for _, b := range o.extras {
		if err := o.tx.Delete(b, o.hkey(name)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return o.tx.Delete(o.heads, o.hkey(name))
}

// page lists heads after the skip token, as secrets.page does.
func (o objects[V]) page(deleted bool, after string, limit int) ([]head, string, error) {
	sc := secrets{tx: o.tx, vault: o.vault, now: o.now}
	return sc.pageOf(o.heads, deleted, after, limit)
}
