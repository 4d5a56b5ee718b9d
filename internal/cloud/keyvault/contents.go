package keyvault

import (
	"context"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Object is one secret, key or certificate of a vault as the cloud's web view lists it: its
// kind, name and version ids, never a value.
type Object struct {
	Kind     string // "secret", "key" or "certificate"
	Name     string
	Versions []string
	Deleted  bool // soft-deleted, recoverable until its purge date
}

// Contents lists the vault's secrets, keys and certificates (deleted ones too), by kind, then
// name (the store's key order). It reads names and version ids only: no value is ever decoded.
func (s *Service) Contents(ctx context.Context, vault string) ([]Object, error) {
	v, err := s.Vault(ctx, vault)
	if err != nil {
		return nil, err
	}
	now := s.now().Unix()
	var out []Object
	err = s.o.Store.View(ctx, func(tx *store.Tx) error {
		for _, k := range []struct{ kind, heads, versions string }{
			{"secret", bucketHeads, bucketVersions},
			{"key", bucketKeyHeads, bucketKeyVersions},
			{"certificate", bucketCertHeads, bucketCertVersions},
		} {
			err := tx.ForEach(k.heads, vaultKey(v.Name)+"/", func(_ string, decode func(any) error) error {
				var h head
				if err := decode(&h); err != nil {
					return err
				}
				if h.Deleted != 0 && h.PurgeAt != 0 && now >= h.PurgeAt {
					return nil // past its purge date: gone
				}
				o := Object{Kind: k.kind, Name: h.Name, Deleted: h.Deleted != 0}
				prefix := headKey(v.Name, h.Name) + "/"
				if err := tx.ForEach(k.versions, prefix, func(key string, _ func(any) error) error {
					o.Versions = append(o.Versions, strings.TrimPrefix(key, prefix))
					return nil
				}); err != nil {
					return err
				}
				out = append(out, o)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}
