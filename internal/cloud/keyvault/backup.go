package keyvault

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Backups are sealed with AES-GCM under a key the cloud keeps in its store, so a backup blob
// reveals nothing, cannot be altered, and restores only into this cloud, as Key Vault's backups
// restore only within their geography.
const (
	bucketBackupKey = "keyvault.backupKey"
	backupKeyName   = "aes256"
	backupFormat    = 1
	maxVersions     = 1000 // per backup
)

var backupAAD = []byte("cerulean keyvault secret backup v1")

type sealer struct{ aead cipher.AEAD }

// newSealer loads the backup key, creating it on first use.
func newSealer(ctx context.Context, st *store.Store) (*sealer, error) {
	var key []byte
	err := st.View(ctx, func(tx *store.Tx) error { return tx.Get(bucketBackupKey, backupKeyName, &key) })
	if errors.Is(err, store.ErrNotFound) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate backup key: %w", err)
		}
		err = st.Update(ctx, func(tx *store.Tx) error {
			var existing []byte
			if err := tx.Get(bucketBackupKey, backupKeyName, &existing); err == nil {
				key = existing
				return nil
			}
			return tx.Put(bucketBackupKey, backupKeyName, key)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("load backup key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("load backup key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("load backup key: %w", err)
	}
	return &sealer{aead: aead}, nil
}

func (s *sealer) seal(b backupOf) ([]byte, error) { return s.sealAs(string(backupAAD), b) }

// sealAs seals any backup document; the AAD names what it is (a secret's, a key's or a
// certificate's backup), so one kind's blob never restores as another.
func (s *sealer) sealAs(aad string, v any) ([]byte, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode backup: %w", err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal backup: %w", err)
	}
	out := append([]byte{backupFormat}, nonce...) // format, nonce, then the sealed backup
	return s.aead.Seal(out, nonce, plain, []byte(aad)), nil
}

// unsealAs opens a blob sealed with sealAs(aad) into v; anything else is BadParameter.
func (s *sealer) unsealAs(aad string, blob []byte, v any) error {
	bad := errBadParameter("Backup blob contains invalid or corrupt version.")
	n := s.aead.NonceSize()
	if len(blob) < 1+n+s.aead.Overhead() || blob[0] != backupFormat {
		return bad
	}
	plain, err := s.aead.Open(nil, blob[1:1+n], blob[1+n:], []byte(aad))
	if err != nil {
		return bad
	}
	if json.Unmarshal(plain, v) != nil {
		return bad
	}
	return nil
}

// unseal opens and validates a secret's blob; anything not sealed by this cloud, or not a
// well-formed backup, is BadParameter.
func (s *sealer) unseal(blob []byte) (backupOf, error) {
	bad := errBadParameter("Backup blob contains invalid or corrupt version.")
	var b backupOf
	if err := s.unsealAs(string(backupAAD), blob, &b); err != nil {
		return b, err
	}
	if !secretName.MatchString(b.Name) || len(b.Versions) == 0 || len(b.Versions) > maxVersions {
		return backupOf{}, bad
	}
	latest := false
	for _, v := range b.Versions {
		if !secretVersion.MatchString(v.ID) {
			return backupOf{}, bad
		}
		latest = latest || v.ID == b.Latest
	}
	if !latest {
		return backupOf{}, bad
	}
	return b, nil
}
