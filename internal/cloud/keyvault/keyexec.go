package keyvault

import (
	"context"
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// keyCreateBody is POST /keys/{name}/create.
type keyCreateBody struct {
	Kty        string            `json:"kty"`
	KeySize    int               `json:"key_size"`
	Exponent   int               `json:"public_exponent"`
	Crv        string            `json:"crv"`
	KeyOps     []string          `json:"key_ops"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

// keyImportBody is PUT /keys/{name}.
type keyImportBody struct {
	Key        *jwkIn            `json:"key"`
	HSM        bool              `json:"Hsm"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

// keyUpdateBody is PATCH /keys/{name}/{version}.
type keyUpdateBody struct {
	KeyOps     []string          `json:"key_ops"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

func applyKeyAttributes(k *keyVersion, a *attributesIn) {
	if a == nil {
		return
	}
	if a.Enabled != nil {
		k.Enabled = *a.Enabled
	}
	if a.NotBefore != nil {
		k.NotBefore = a.NotBefore
	}
	if a.Expires != nil {
		k.Expires = a.Expires
	}
}

// execKey runs a parsed, authorized key operation.
func (s *Service) execKey(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	switch rt.op {
	case opKeyCreate:
		return s.createKey(ctx, v, rt, body)
	case opKeyImport:
		return s.importKey(ctx, v, rt, body)
	case opKeyGet:
		return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
			h, k, err := activeKey(ks, rt)
			if err != nil {
				return nil, err
			}
			return keyBundle(ks.vault, h, k)
		})
	case opKeyUpdate:
		return s.updateKey(ctx, v, rt, body)
	case opKeyList, opKeyListDeleted:
		return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) { return listKeys(ks, rt) })
	case opKeyVersions:
		return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) { return listKeyVersions(ks, rt) })
	case opKeyDelete:
		return s.deleteKey(ctx, v, rt)
	case opKeyGetDeleted:
		return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
			h, err := ks.deleted(rt.name)
			if err != nil {
				return nil, err
			}
			k, err := ks.version(h, "")
			if err != nil {
				return nil, err
			}
			return deletedKeyBundle(ks.vault, h, k)
		})
	case opKeyRecover:
		return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
			h, k, err := ks.recover(rt.name)
			if err != nil {
				return nil, err
			}
			return keyBundle(ks.vault, h, k)
		})
	case opKeyPurge:
		return s.purgeKey(ctx, v, rt)
	case opKeyBackup:
		return s.backupKey(ctx, v, rt.name)
	case opKeyRestore:
		return s.restoreKey(ctx, v, body)
	case opKeyRotate:
		return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
			h, kv, err := rotateKey(ks, rt.name)
			if err != nil {
				return nil, err
			}
			return keyBundle(ks.vault, h, kv)
		})
	case opKeyGetPolicy:
		return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
			h, err := ks.active(rt.name)
			if err != nil {
				return nil, err
			}
			return keyPolicy(ks, h)
		})
	case opKeySetPolicy:
		return s.setKeyPolicy(ctx, v, rt, body)
	case opKeySign, opKeyVerify, opKeyEncrypt, opKeyDecrypt, opKeyWrap, opKeyUnwrap:
		return s.keyOperation(ctx, v, rt, body)
	}
	return httpx.Response{}, errNotFound()
}

// createKey generates a key as a new version of rt.name.
func (s *Service) createKey(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	var b keyCreateBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if err := checkCommon(nil, b.Attributes, b.Tags); err != nil {
		return httpx.Response{}, err
	}
	kty, err := checkKty(v, b.Kty)
	if err != nil {
		return httpx.Response{}, err
	}
	ops, err := canonicalOps(b.KeyOps, kty)
	if err != nil {
		return httpx.Response{}, err
	}
	der, err := generate(kty, b.KeySize, b.Exponent, b.Crv)
	if err != nil {
		return httpx.Response{}, err
	}
	kv := keyVersion{Kty: kty, Ops: ops, Private: der, Enabled: true, Tags: b.Tags}
	applyKeyAttributes(&kv, b.Attributes)
	return s.addKey(ctx, v, rt.name, kv)
}

// addKey stores kv as the newest version of the key name.
func (s *Service) addKey(ctx context.Context, v Vault, name string, kv keyVersion) (httpx.Response, error) {
	return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		h, kv, err := addKeyVersion(ks, name, kv)
		if err != nil {
			return nil, err
		}
		return keyBundle(ks.vault, h, kv)
	})
}

// importKey stores a caller's key as a new version of rt.name.
func (s *Service) importKey(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	var b keyImportBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if b.Key == nil {
		return httpx.Response{}, errBadParameter("Property 'key' is required.")
	}
	if err := checkCommon(nil, b.Attributes, b.Tags); err != nil {
		return httpx.Response{}, err
	}
	der, kty, err := importPrivate(*b.Key)
	if err != nil {
		return httpx.Response{}, err
	}
	if b.HSM {
		if kty, err = checkKty(v, kty+"-HSM"); err != nil {
			return httpx.Response{}, err
		}
	}
	ops, err := canonicalOps(b.Key.KeyOps, kty)
	if err != nil {
		return httpx.Response{}, err
	}
	kv := keyVersion{Kty: kty, Ops: ops, Private: der, Enabled: true, Tags: b.Tags}
	applyKeyAttributes(&kv, b.Attributes)
	return s.addKey(ctx, v, rt.name, kv)
}

// updateKey changes a version's operations, attributes and tags; a managed key refuses.
func (s *Service) updateKey(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	var b keyUpdateBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if err := checkCommon(nil, b.Attributes, b.Tags); err != nil {
		return httpx.Response{}, err
	}
	return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		h, k, err := activeKey(ks, rt)
		if err != nil {
			return nil, err
		}
		if k.Managed {
			return nil, errManaged("key", h.Name)
		}
		if b.KeyOps != nil {
			if k.Ops, err = canonicalOps(b.KeyOps, k.Kty); err != nil {
				return nil, err
			}
		}
		applyKeyAttributes(&k, b.Attributes)
		if k.NotBefore != nil && k.Expires != nil && *k.Expires <= *k.NotBefore {
			return nil, errBadParameter("Property 'attributes.exp' must be later than 'attributes.nbf'.")
		}
		if b.Tags != nil {
			k.Tags = b.Tags
		}
		k.Updated = ks.now
		if err := ks.putVersion(h, k); err != nil {
			return nil, err
		}
		return keyBundle(ks.vault, h, k)
	})
}

// deleteKey soft-deletes the key; a certificate's managed key refuses.
func (s *Service) deleteKey(ctx context.Context, v Vault, rt route) (httpx.Response, error) {
	return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		if h, err := ks.active(rt.name); err == nil {
			if k, err := ks.version(h, ""); err == nil && k.Managed {
				return nil, errManaged("key", h.Name)
			}
		}
		h, k, err := ks.softDelete(rt.name)
		if err != nil {
			return nil, err
		}
		return deletedKeyBundle(ks.vault, h, k)
	})
}

// purgeKey removes a deleted key for good, unless the vault protects purges.
func (s *Service) purgeKey(ctx context.Context, v Vault, rt route) (httpx.Response, error) {
	if v.PurgeProtection {
		return httpx.Response{}, errPurgeProtected(v, "key")
	}
	res, err := s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		if _, err := ks.deleted(rt.name); err != nil {
			return nil, err
		}
		return nil, ks.purge(rt.name)
	})
	res.Status = http.StatusNoContent
	return res, err
}

// setKeyPolicy replaces the key's rotation policy, keeping its creation time.
func (s *Service) setKeyPolicy(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	p, err := parseRotationPolicy(body)
	if err != nil {
		return httpx.Response{}, err
	}
	return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		h, err := ks.active(rt.name)
		if err != nil {
			return nil, err
		}
		old, err := keyPolicy(ks, h)
		if err != nil {
			return nil, err
		}
		if p.Attributes == nil {
			p.Attributes = &rotationAttributes{}
		}
		p.Attributes.Created, p.Attributes.Updated = ks.now, ks.now
		if old.Attributes != nil && old.Attributes.Created != 0 {
			p.Attributes.Created = old.Attributes.Created
		}
		p.ID = ""
		if err := ks.putExtra(bucketKeyPolicies, h.Name, p); err != nil {
			return nil, err
		}
		p.ID = keyID(ks.vault, h.Name, "") + "/rotationpolicy"
		return p, nil
	})
}

// keyOperation runs a cryptographic operation with the version a request names.
func (s *Service) keyOperation(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	b, err := parseKeyOpBody(body)
	if err != nil {
		return httpx.Response{}, err
	}
	if rt.op == opKeyVerify && b.Digest == nil {
		return httpx.Response{}, errBadParameter("Property 'digest' is required.")
	}
	return s.readKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		h, k, err := activeKey(ks, rt)
		if err != nil {
			return nil, err
		}
		return runKeyOp(ks.vault, h, k, rt.op, b, ks.now)
	})
}

// activeKey is the version a request names, refused when disabled (every operation but the
// attribute update that could enable it again).
func activeKey(ks objects[keyVersion], rt route) (head, keyVersion, error) {
	h, err := ks.active(rt.name)
	if err != nil {
		return h, keyVersion{}, err
	}
	k, err := ks.version(h, rt.version)
	if err != nil {
		return h, k, err
	}
	if !k.Enabled && rt.op != opKeyUpdate && opOf[rt.op] == "" {
		return h, k, errorf(http.StatusForbidden, "Forbidden", "Operation get is not allowed on a disabled key.").inner("KeyDisabled")
	}
	return h, k, nil
}

func keyPolicy(ks objects[keyVersion], h head) (rotationPolicy, error) {
	var p rotationPolicy
	ok, err := ks.getExtra(bucketKeyPolicies, h.Name, &p)
	if err != nil {
		return p, err
	}
	if !ok {
		p = defaultRotationPolicy()
	}
	p.ID = keyID(ks.vault, h.Name, "") + "/rotationpolicy"
	return p, nil
}

// rotateKey makes a new version of the same type, size, curve and operations; its expiry is
// the policy's expiryTime from now.
func rotateKey(ks objects[keyVersion], name string) (head, keyVersion, error) {
	h, err := ks.active(name)
	if err != nil {
		return h, keyVersion{}, err
	}
	cur, err := ks.version(h, "")
	if err != nil {
		return h, cur, err
	}
	if cur.Managed {
		return h, cur, errManaged("key", h.Name)
	}
	size, crv, err := keyShape(cur)
	if err != nil {
		return h, cur, err
	}
	der, err := generate(cur.Kty, size, 0, crv)
	if err != nil {
		return h, cur, err
	}
	p, err := keyPolicy(ks, h)
	if err != nil {
		return h, cur, err
	}
	kv := keyVersion{Kty: cur.Kty, Ops: cur.Ops, Private: der, Enabled: true, Tags: cur.Tags,
		Expires: rotationExpiry(p, ks.now)}
	return addKeyVersion(ks, h.Name, kv)
}

func errPurgeProtected(v Vault, noun string) *Error {
	return errorf(http.StatusForbidden, "Forbidden",
		"Operation 'purge' is not allowed on vault %s because purge protection is enabled; the %s will be purged at its scheduled purge date.", v.Name, noun).inner("OperationNotAllowed")
}

func (s *Service) readKey(ctx context.Context, v Vault, fn func(objects[keyVersion]) (any, error)) (httpx.Response, error) {
	return s.read(ctx, v, func(sc secrets) (any, error) { return fn(s.keys(sc.tx, sc.vault)) })
}

func (s *Service) writeKey(ctx context.Context, v Vault, fn func(objects[keyVersion]) (any, error)) (httpx.Response, error) {
	return s.write(ctx, v, func(sc secrets) (any, error) { return fn(s.keys(sc.tx, sc.vault)) })
}

// keyBackupOf is what a key backup holds: every version, private keys included, and the policy.
type keyBackupOf struct {
	Name     string          `json:"name"`
	Latest   string          `json:"latest"`
	Versions []keyVersion    `json:"versions"`
	Policy   *rotationPolicy `json:"policy,omitempty"`
}

const keyBackupAAD = "cerulean keyvault key backup v1"

func (s *Service) backupKey(ctx context.Context, v Vault, name string) (httpx.Response, error) {
	var b keyBackupOf
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		ks := s.keys(tx, v)
		h, err := ks.active(name)
		if err != nil {
			return err
		}
		if k, err := ks.version(h, ""); err == nil && k.Managed {
			return errManaged("key", h.Name)
		}
		b = keyBackupOf{Name: h.Name, Latest: h.Latest}
		if b.Versions, err = ks.versions(h); err != nil {
			return err
		}
		var p rotationPolicy
		if ok, err := ks.getExtra(bucketKeyPolicies, h.Name, &p); err != nil {
			return err
		} else if ok {
			b.Policy = &p
		}
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	blob, err := s.sealer.sealAs(keyBackupAAD, b)
	if err != nil {
		return httpx.Response{}, err
	}
	if len(blob) > maxBackupBlobBytes {
		return httpx.Response{}, errBadParameter("The key %s has too many versions to back up.", b.Name)
	}
	return httpx.Response{Body: map[string]string{"value": encodeBlob(blob)}}, nil
}

func (s *Service) restoreKey(ctx context.Context, v Vault, body []byte) (httpx.Response, error) {
	blob, err := parseRestoreBody(body)
	if err != nil {
		return httpx.Response{}, err
	}
	var b keyBackupOf
	if err := s.sealer.unsealAs(keyBackupAAD, blob, &b); err != nil {
		return httpx.Response{}, err
	}
	if !secretName.MatchString(b.Name) || len(b.Versions) == 0 || len(b.Versions) > maxVersions {
		return httpx.Response{}, errBadParameter("Backup blob contains invalid or corrupt version.")
	}
	return s.writeKey(ctx, v, func(ks objects[keyVersion]) (any, error) {
		h, ok, err := ks.claim(b.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, errorf(http.StatusConflict, "Conflict", "Key %s already exists in this vault.", h.Name)
		}
		h = head{Name: b.Name, Latest: b.Latest}
		if err := ks.put(h, b.Versions...); err != nil {
			return nil, err
		}
		if b.Policy != nil {
			if err := ks.putExtra(bucketKeyPolicies, h.Name, b.Policy); err != nil {
				return nil, err
			}
		}
		k, err := ks.version(h, "")
		if err != nil {
			return nil, errBadParameter("Backup blob contains invalid or corrupt version.")
		}
		return keyBundle(ks.vault, h, k)
	})
}
