package keyvault

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

type certCreateBody struct {
	Policy     *certPolicy       `json:"policy"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

type certImportBody struct {
	Value      string            `json:"value"`
	Password   string            `json:"pwd"`
	Policy     *certPolicy       `json:"policy"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

type certMergeBody struct {
	X5c        []string          `json:"x5c"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

type certUpdateBody struct {
	Policy     *certPolicy       `json:"policy"`
	Attributes *attributesIn     `json:"attributes"`
	Tags       map[string]string `json:"tags"`
}

func enabledOf(a *attributesIn) *bool {
	if a == nil {
		return nil
	}
	return a.Enabled
}

func (s *Service) readCerts(ctx context.Context, v Vault, fn func(certStores) (any, error)) (httpx.Response, error) {
	return s.read(ctx, v, func(sc secrets) (any, error) { return fn(s.certStores(sc.tx, sc.vault)) })
}

func (s *Service) writeCerts(ctx context.Context, v Vault, fn func(certStores) (any, error)) (httpx.Response, error) {
	return s.write(ctx, v, func(sc secrets) (any, error) { return fn(s.certStores(sc.tx, sc.vault)) })
}

// execCert runs a parsed, authorized certificate operation.
func (s *Service) execCert(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	switch rt.op {
	case opCertCreate:
		return s.createCert(ctx, v, rt.name, body)
	case opCertImport:
		return s.importCert(ctx, v, rt.name, body)
	case opCertMerge:
		return s.mergeCert(ctx, v, rt.name, body)
	case opCertGet:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) {
			h, err := cs.certs.active(rt.name)
			if err != nil {
				return nil, err
			}
			c, err := cs.certs.version(h, rt.version)
			if err != nil {
				return nil, err
			}
			p, _, err := cs.policy(h.Name)
			return certBundle(v, h, c, &p), err
		})
	case opCertUpdate:
		var b certUpdateBody
		if err := decodeObject(body, &b); err != nil {
			return httpx.Response{}, err
		}
		if err := checkCommon(nil, nil, b.Tags); err != nil {
			return httpx.Response{}, err
		}
		return s.writeCerts(ctx, v, func(cs certStores) (any, error) { return cs.update(rt, b) })
	case opCertList, opCertListDeleted:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) { return listCerts(cs.certs, rt) })
	case opCertVersions:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) { return listCertVersions(cs.certs, rt) })
	case opCertDelete:
		return s.deleteCert(ctx, v, rt)
	case opCertGetDeleted:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) {
			h, err := cs.certs.deleted(rt.name)
			if err != nil {
				return nil, err
			}
			c, err := cs.certs.version(h, "")
			if err != nil {
				return nil, err
			}
			p, _, err := cs.policy(h.Name)
			return deletedCertBundle(v, h, c, &p), err
		})
	case opCertRecover:
		return s.recoverCert(ctx, v, rt)
	case opCertPurge:
		return s.purgeCert(ctx, v, rt)
	case opCertGetPolicy:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) {
			h, err := cs.certs.active(rt.name)
			if err != nil {
				return nil, err
			}
			p, _, err := cs.policy(h.Name)
			p.ID = objectID(v, "certificates", h.Name, "") + "/policy"
			return p, err
		})
	case opCertUpdatePolicy:
		return s.updateCertPolicy(ctx, v, rt, body)
	case opCertGetPending:
		return s.readCerts(ctx, v, func(cs certStores) (any, error) {
			op, err := cs.pending(rt.name)
			return certOp(v, rt.name, op), err
		})
	case opCertUpdatePending:
		return s.updatePendingCert(ctx, v, rt, body)
	case opCertDeletePending:
		return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
			op, err := cs.pending(rt.name)
			if err != nil {
				return nil, err
			}
			return certOp(v, rt.name, op), cs.certs.deleteExtra(bucketCertPending, rt.name)
		})
	case opCertBackup, opCertRestore:
		return httpx.Response{}, errorf(http.StatusNotImplemented, "NotImplemented", "Certificate backup and restore are not supported by the local Key Vault; back up the certificate's secret, or export and import it.")
	}
	return httpx.Response{}, errNotFound()
}

// deleteCert soft-deletes the certificate with its key and secret.
func (s *Service) deleteCert(ctx context.Context, v Vault, rt route) (httpx.Response, error) {
	return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		p, _, err := cs.policy(rt.name)
		if err != nil {
			return nil, err
		}
		h, c, err := cs.certs.softDelete(rt.name)
		if err != nil {
			return nil, err
		}
		// The key and the secret go with it (soft-deleted or purged alike).
		if _, _, err := cs.keys.softDelete(rt.name); err != nil {
			return nil, err
		}
		if _, _, err := cs.secrets.softDelete(rt.name); err != nil {
			return nil, err
		}
		return deletedCertBundle(v, h, c, &p), nil
	})
}

// recoverCert brings back a deleted certificate with its key and secret.
func (s *Service) recoverCert(ctx context.Context, v Vault, rt route) (httpx.Response, error) {
	return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		h, c, err := cs.certs.recover(rt.name)
		if err != nil {
			return nil, err
		}
		if _, _, err := cs.keys.recover(rt.name); err != nil {
			return nil, err
		}
		if _, _, err := cs.secrets.recover(rt.name); err != nil {
			return nil, err
		}
		p, _, err := cs.policy(h.Name)
		return certBundle(v, h, c, &p), err
	})
}

// purgeCert removes a deleted certificate, its key and its secret for good, unless the vault protects purges.
func (s *Service) purgeCert(ctx context.Context, v Vault, rt route) (httpx.Response, error) {
	if v.PurgeProtection {
		return httpx.Response{}, errPurgeProtected(v, "certificate")
	}
	res, err := s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		if _, err := cs.certs.deleted(rt.name); err != nil {
			return nil, err
		}
		for _, purge := range []func(string) error{cs.certs.purge, cs.keys.purge, cs.secrets.purge} {
			if err := purge(rt.name); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	res.Status = http.StatusNoContent
	return res, err
}

// updateCertPolicy merges a policy update into the certificate's policy.
func (s *Service) updateCertPolicy(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	var u certPolicy
	if err := decodeObject(body, &u); err != nil {
		return httpx.Response{}, err
	}
	return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		h, err := cs.certs.active(rt.name)
		if err != nil {
			return nil, err
		}
		p, _, err := cs.policy(h.Name)
		if err != nil {
			return nil, err
		}
		p = p.merge(u).withDefaults()
		if err := p.check(v); err != nil {
			return nil, err
		}
		if err := cs.putPolicy(h.Name, p); err != nil {
			return nil, err
		}
		p.ID = objectID(v, "certificates", h.Name, "") + "/policy"
		return p, nil
	})
}

// updatePendingCert cancels a pending operation still in progress.
func (s *Service) updatePendingCert(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	var b struct {
		Cancel *bool `json:"cancellation_requested"`
	}
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if b.Cancel == nil {
		return httpx.Response{}, errBadParameter("Property 'cancellation_requested' is required.")
	}
	return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		op, err := cs.pending(rt.name)
		if err != nil {
			return nil, err
		}
		if *b.Cancel && op.Status == "inProgress" {
			op.Cancelled, op.Status, op.StatusDetails, op.Private = true, "cancelled", "The operation was cancelled.", nil
		}
		return certOp(v, rt.name, op), cs.certs.putExtra(bucketCertPending, rt.name, op)
	})
}

func (cs certStores) pending(name string) (pendingOp, error) {
	var op pendingOp
	ok, err := cs.certs.getExtra(bucketCertPending, name, &op)
	if err == nil && !ok {
		err = errorf(http.StatusNotFound, "PendingCertificateNotFound", "Pending certificate not found: %s", name)
	}
	return op, err
}

// createCert issues a Self certificate at once, or starts an Unknown issuer's operation whose
// CSR the caller gets signed and merges. Either way the answer is the operation (202).
func (s *Service) createCert(ctx context.Context, v Vault, name string, body []byte) (httpx.Response, error) {
	var b certCreateBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if err := checkCommon(nil, b.Attributes, b.Tags); err != nil {
		return httpx.Response{}, err
	}
	if b.Policy == nil {
		return httpx.Response{}, errBadParameter("Property 'policy' is required.")
	}
	p := b.Policy.withDefaults()
	if err := p.check(v); err != nil {
		return httpx.Response{}, err
	}
	// The key is made before the transaction: RSA generation is slow, and writes wait on it.
	der, signer, err := newCertKey(p)
	if err != nil {
		return httpx.Response{}, err
	}
	self := strings.EqualFold(p.Issuer.Name, "Self")
	p.Issuer.Name = map[bool]string{true: "Self", false: "Unknown"}[self]
	op := pendingOp{Issuer: *p.Issuer, RequestID: strings.ReplaceAll(uuid.NewString(), "-", ""), Tags: b.Tags, Enabled: enabledOf(b.Attributes)}
	var cert []byte
	if self {
		if cert, err = selfSigned(p, signer, s.now()); err != nil {
			return httpx.Response{}, err
		}
		op.Status = "completed"
	} else {
		if op.CSR, err = csrFor(p, signer); err != nil {
			return httpx.Response{}, errBadParameter("A certificate signing request cannot be made with this policy.")
		}
		op.Status, op.StatusDetails, op.Private = "inProgress", "Pending certificate created. Please merge the signed certificate with the request.", der
	}
	res, err := s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		if cur, err := cs.pending(name); err == nil && cur.Status == "inProgress" {
			return nil, errorf(http.StatusConflict, "Conflict", "Certificate %s has a pending operation; merge, cancel or delete it first.", name)
		}
		if _, _, err := cs.certs.claim(name); err != nil {
			return nil, err
		}
		if err := cs.freeFor(name); err != nil {
			return nil, err
		}
		if self {
			if _, _, err := cs.complete(name, der, [][]byte{cert}, p, b.Tags, op.Enabled); err != nil {
				return nil, err
			}
		} else if err := cs.putPolicy(name, p); err != nil {
			return nil, err
		}
		return certOp(v, name, op), cs.certs.putExtra(bucketCertPending, name, op)
	})
	res.Status = http.StatusAccepted
	return res, err
}

func (s *Service) mergeCert(ctx context.Context, v Vault, name string, body []byte) (httpx.Response, error) {
	var b certMergeBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if len(b.X5c) == 0 || len(b.X5c) > 10 {
		return httpx.Response{}, errBadParameter("Property 'x5c' must hold the signed certificate and at most 9 issuers.")
	}
	chain := make([][]byte, len(b.X5c))
	for i, c := range b.X5c {
		der, err := base64.StdEncoding.DecodeString(c)
		if err != nil {
			return httpx.Response{}, errBadParameter("Property 'x5c' must hold base64-encoded DER certificates.")
		}
		if _, err := x509.ParseCertificate(der); err != nil {
			return httpx.Response{}, errBadParameter("Property 'x5c' item %d is not a certificate.", i)
		}
		chain[i] = der
	}
	res, err := s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		op, err := cs.pending(name)
		if err != nil {
			return nil, err
		}
		if op.Status != "inProgress" || op.Private == nil {
			return nil, errorf(http.StatusForbidden, "Forbidden", "Certificate %s has no operation in progress to merge into.", name)
		}
		signer, err := keyVersion{Private: op.Private}.signer()
		if err != nil {
			return nil, err
		}
		leaf, _ := x509.ParseCertificate(chain[0])
		if !samePublic(leaf.PublicKey, signer.Public()) {
			return nil, errBadParameter("Public key from x509 certificate and key of this instance doesn't match.")
		}
		p, _, err := cs.policy(name)
		if err != nil {
			return nil, err
		}
		tags := op.Tags
		if b.Tags != nil {
			tags = b.Tags
		}
		enabled := op.Enabled
		if e := enabledOf(b.Attributes); e != nil {
			enabled = e
		}
		h, c, err := cs.complete(name, op.Private, chain, p, tags, enabled)
		if err != nil {
			return nil, err
		}
		op.Status, op.StatusDetails, op.Private = "completed", "", nil
		if err := cs.certs.putExtra(bucketCertPending, name, op); err != nil {
			return nil, err
		}
		return certBundle(v, h, c, &p), nil
	})
	res.Status = http.StatusCreated
	return res, err
}

func (s *Service) importCert(ctx context.Context, v Vault, name string, body []byte) (httpx.Response, error) {
	var b certImportBody
	if err := decodeObject(body, &b); err != nil {
		return httpx.Response{}, err
	}
	if b.Value == "" {
		return httpx.Response{}, errBadParameter("Property 'value' is required.")
	}
	if err := checkCommon(nil, b.Attributes, b.Tags); err != nil {
		return httpx.Response{}, err
	}
	priv, chain, ct, err := parseImport(b.Value, b.Password)
	if err != nil {
		return httpx.Response{}, err
	}
	leaf, _ := x509.ParseCertificate(chain[0])
	p := policyFromCert(leaf, ct)
	if b.Policy != nil {
		p = p.merge(*b.Policy).withDefaults()
		// The key's shape is the imported key's, whatever the policy said.
		p.KeyProps = policyFromCert(leaf, ct).KeyProps
		if b.Policy.KeyProps != nil && b.Policy.KeyProps.Exportable != nil {
			p.KeyProps.Exportable = b.Policy.KeyProps.Exportable
		}
	}
	return s.writeCerts(ctx, v, func(cs certStores) (any, error) {
		h, c, err := cs.complete(name, priv, chain, p, b.Tags, enabledOf(b.Attributes))
		if err != nil {
			return nil, err
		}
		return certBundle(v, h, c, &p), nil
	})
}

// update changes a version's enabled flag and tags (its key and secret follow), and the policy.
func (cs certStores) update(rt route, b certUpdateBody) (any, error) {
	h, err := cs.certs.active(rt.name)
	if err != nil {
		return nil, err
	}
	c, err := cs.certs.version(h, rt.version)
	if err != nil {
		return nil, err
	}
	if e := enabledOf(b.Attributes); e != nil {
		c.Enabled = *e
		if k, err := cs.keys.version(h, c.ID); err == nil {
			k.Enabled, k.Updated = *e, cs.certs.now
			if err := cs.keys.putVersion(h, k); err != nil {
				return nil, err
			}
		}
		if sv, err := cs.secrets.version(h, c.ID); err == nil {
			sv.Enabled, sv.Updated = *e, cs.certs.now
			if err := cs.secrets.putVersion(h, sv); err != nil {
				return nil, err
			}
		}
	}
	if b.Tags != nil {
		c.Tags = b.Tags
	}
	c.Updated = cs.certs.now
	if err := cs.certs.putVersion(h, c); err != nil {
		return nil, err
	}
	p, _, err := cs.policy(h.Name)
	if err != nil {
		return nil, err
	}
	if b.Policy != nil {
		p = p.merge(*b.Policy).withDefaults()
		if err := cs.putPolicy(h.Name, p); err != nil {
			return nil, err
		}
	}
	return certBundle(cs.certs.vault, h, c, &p), nil
}
