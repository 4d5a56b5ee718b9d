package keyvault

import (
	"crypto/sha1" //nolint:gosec // x5t is the SHA-1 thumbprint by definition
	"encoding/base64"
)

// certBundleJSON is a CertificateBundle, a CertificateItem in lists (no cer, kid, sid), and
// their deleted forms.
type certBundleJSON struct {
	ID                 string            `json:"id"`
	Kid                string            `json:"kid,omitempty"`
	Sid                string            `json:"sid,omitempty"`
	X5t                b64               `json:"x5t,omitempty"`
	Cer                string            `json:"cer,omitempty"` // standard base64 of the DER
	ContentType        string            `json:"contentType,omitempty"`
	Attributes         attributesJSON    `json:"attributes"`
	Tags               map[string]string `json:"tags,omitempty"`
	Policy             *certPolicy       `json:"policy,omitempty"`
	RecoveryID         string            `json:"recoveryId,omitempty"`
	DeletedDate        int64             `json:"deletedDate,omitempty"`
	ScheduledPurgeDate int64             `json:"scheduledPurgeDate,omitempty"`
}

type certListJSON struct {
	Value    []certBundleJSON `json:"value"`
	NextLink *string          `json:"nextLink"`
}

// certOpJSON is a CertificateOperation.
type certOpJSON struct {
	ID                    string     `json:"id"`
	Issuer                certIssuer `json:"issuer"`
	CSR                   string     `json:"csr,omitempty"`
	CancellationRequested bool       `json:"cancellation_requested"`
	Status                string     `json:"status"`
	StatusDetails         string     `json:"status_details,omitempty"`
	Target                string     `json:"target"`
	RequestID             string     `json:"request_id"`
}

func objectID(v Vault, coll, name, version string) string {
	id := v.URI() + coll + "/" + name
	if version != "" {
		id += "/" + version
	}
	return id
}

func certAttributes(v Vault, c certVersion) attributesJSON {
	a := attributesJSON{Enabled: c.Enabled, NotBefore: c.NotBefore, Expires: c.Expires, Created: c.Created, Updated: c.Updated, RecoveryLevel: v.RecoveryLevel()}
	if v.SoftDelete {
		a.RecoverableDays = v.RetentionDays
	}
	return a
}

func thumbprint(der []byte) b64 {
	sum := sha1.Sum(der) //nolint:gosec // see import
	return sum[:]
}

func certBundle(v Vault, h head, c certVersion, p *certPolicy) certBundleJSON {
	b := certBundleJSON{
		ID: objectID(v, "certificates", h.Name, c.ID), Kid: objectID(v, "keys", h.Name, c.ID), Sid: objectID(v, "secrets", h.Name, c.ID),
		X5t: thumbprint(c.Chain[0]), Cer: base64.StdEncoding.EncodeToString(c.Chain[0]),
		Attributes: certAttributes(v, c), Tags: c.Tags,
	}
	if p != nil {
		pp := *p
		pp.ID = objectID(v, "certificates", h.Name, "") + "/policy"
		b.Policy = &pp
		if p.SecretProps != nil {
			b.ContentType = p.SecretProps.ContentType
		}
	}
	return b
}

func deletedCertBundle(v Vault, h head, c certVersion, p *certPolicy) certBundleJSON {
	b := certBundle(v, h, c, p)
	b.RecoveryID = v.URI() + "deletedcertificates/" + h.Name
	b.DeletedDate, b.ScheduledPurgeDate = h.Deleted, h.PurgeAt
	return b
}

func certItem(v Vault, h head, c certVersion, withVersion bool) certBundleJSON {
	id := objectID(v, "certificates", h.Name, "")
	if withVersion {
		id = objectID(v, "certificates", h.Name, c.ID)
	}
	return certBundleJSON{ID: id, X5t: thumbprint(c.Chain[0]), Attributes: certAttributes(v, c), Tags: c.Tags}
}

func certOp(v Vault, name string, op pendingOp) certOpJSON {
	o := certOpJSON{
		ID: objectID(v, "certificates", name, "") + "/pending", Issuer: op.Issuer, CancellationRequested: op.Cancelled,
		Status: op.Status, StatusDetails: op.StatusDetails, Target: objectID(v, "certificates", name, ""), RequestID: op.RequestID,
	}
	if len(op.CSR) > 0 {
		o.CSR = base64.StdEncoding.EncodeToString(op.CSR)
	}
	return o
}

// listCerts is a page of GET /certificates or /deletedcertificates.
func listCerts(o objects[certVersion], rt route) (certListJSON, error) {
	deleted := rt.op == opCertListDeleted
	out := certListJSON{Value: []certBundleJSON{}}
	after, err := decodeToken(rt.skipToken)
	if err != nil {
		return out, err
	}
	heads, next, err := o.page(deleted, after, rt.maxResults)
	if err != nil {
		return out, err
	}
	for _, h := range heads {
		c, err := o.version(h, "")
		if err != nil {
			return out, err
		}
		item := certItem(o.vault, h, c, false)
		if deleted {
			item.RecoveryID = o.vault.URI() + "deletedcertificates/" + h.Name
			item.DeletedDate, item.ScheduledPurgeDate = h.Deleted, h.PurgeAt
		}
		out.Value = append(out.Value, item)
	}
	path := "certificates"
	if deleted {
		path = "deletedcertificates"
	}
	out.NextLink = nextLink(o.vault, path, rt, next)
	return out, nil
}

func listCertVersions(o objects[certVersion], rt route) (certListJSON, error) {
	out := certListJSON{Value: []certBundleJSON{}}
	h, err := o.active(rt.name)
	if err != nil {
		return out, nil //nolint:nilerr // an unknown or deleted name lists no versions
	}
	vs, err := o.versions(h)
	if err != nil {
		return out, err
	}
	page, next, err := pageSlice(vs, rt)
	if err != nil {
		return out, err
	}
	for _, c := range page {
		out.Value = append(out.Value, certItem(o.vault, h, c, true))
	}
	out.NextLink = nextLink(o.vault, "certificates/"+h.Name+"/versions", rt, next)
	return out, nil
}
