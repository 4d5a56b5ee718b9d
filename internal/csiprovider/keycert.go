package csiprovider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
)

// fetchVersion gets one version (the latest for "") of an object of any type.
func (p *Provider) fetchVersion(ctx context.Context, vc *vaultClient, vault string, o Object, version string) (fetched, error) {
	switch o.ObjectType {
	case TypeKey:
		return p.key(ctx, vc, vault, o, version)
	case TypeCert:
		return p.cert(ctx, vc, vault, o, version)
	}
	return p.secret(ctx, vc, vault, o, version)
}

// key writes a key's public half as a PEM "PUBLIC KEY" (PKIX), as the upstream provider does:
// Key Vault never returns a private key.
func (p *Provider) key(ctx context.Context, vc *vaultClient, vault string, o Object, version string) (fetched, error) {
	resp, err := vc.keys.GetKey(ctx, o.ObjectName, version, nil)
	if err != nil {
		return fetched{}, kvError(err, o, vault)
	}
	k := resp.Key
	if k == nil || k.Kty == nil || k.KID == nil {
		return fetched{}, fmt.Errorf("get %s from vault %q: the answer has no key", o, vault)
	}
	var pub any
	switch *k.Kty {
	case azkeys.KeyTypeRSA, azkeys.KeyTypeRSAHSM:
		e := new(big.Int).SetBytes(k.E)
		if !e.IsInt64() || e.Int64() > 1<<31-1 {
			return fetched{}, fmt.Errorf("%w: %s in vault %q: the key's exponent is out of range", ErrDecode, o, vault)
		}
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(k.N), E: int(e.Int64())} //nolint:gosec // bounded just above
	case azkeys.KeyTypeEC, azkeys.KeyTypeECHSM:
		curves := map[azkeys.CurveName]elliptic.Curve{azkeys.CurveNameP256: elliptic.P256(), azkeys.CurveNameP384: elliptic.P384(), azkeys.CurveNameP521: elliptic.P521()}
		if k.Crv == nil || curves[*k.Crv] == nil {
			return fetched{}, fmt.Errorf("%w: %s in vault %q: the key's curve is not P-256, P-384 or P-521", ErrDecode, o, vault)
		}
		c := curves[*k.Crv]
		size := (c.Params().BitSize + 7) / 8
		if len(k.X) > size || len(k.Y) > size {
			return fetched{}, fmt.Errorf("%w: %s in vault %q: the key's coordinates do not fit its curve", ErrDecode, o, vault)
		}
		raw := make([]byte, 1+2*size)
		raw[0] = 4
		copy(raw[1+size-len(k.X):], k.X)
		copy(raw[1+2*size-len(k.Y):], k.Y)
		if pub, err = ecdsa.ParseUncompressedPublicKey(c, raw); err != nil {
			return fetched{}, fmt.Errorf("%w: %s in vault %q: the key is not on its curve", ErrDecode, o, vault)
		}
	default:
		return fetched{}, fmt.Errorf("%w: %s in vault %q: key type %s is not supported", ErrDecode, o, vault, *k.Kty)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fetched{}, fmt.Errorf("%w: %s in vault %q: %w", ErrDecode, o, vault, err)
	}
	return fetched{value: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), version: k.KID.Version()}, nil
}

// cert writes a certificate (without its key) as a PEM "CERTIFICATE", as upstream does; its
// key is the certificate's secret, objectType secret.
func (p *Provider) cert(ctx context.Context, vc *vaultClient, vault string, o Object, version string) (fetched, error) {
	resp, err := vc.certs.GetCertificate(ctx, o.ObjectName, version, nil)
	if err != nil {
		return fetched{}, kvError(err, o, vault)
	}
	if len(resp.CER) == 0 || resp.ID == nil {
		return fetched{}, fmt.Errorf("get %s from vault %q: the answer has no certificate", o, vault)
	}
	return fetched{value: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: resp.CER})), version: resp.ID.Version()}, nil
}

// listedVersion is a version as a versions list shows it.
type listedVersion struct {
	id      string
	created time.Time
	enabled bool
}

// versions lists every version of an object, for objectVersionHistory.
func (p *Provider) versions(ctx context.Context, vc *vaultClient, o Object) ([]listedVersion, error) {
	var out []listedVersion
	add := func(id string, created *time.Time, enabled *bool) {
		v := listedVersion{id: id, enabled: enabled == nil || *enabled}
		if created != nil {
			v.created = *created
		}
		out = append(out, v)
	}
	switch o.ObjectType {
	case TypeKey:
		for pager := vc.keys.NewListKeyPropertiesVersionsPager(o.ObjectName, nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, k := range page.Value {
				if k.KID != nil && k.Attributes != nil {
					add(k.KID.Version(), k.Attributes.Created, k.Attributes.Enabled)
				}
			}
		}
	case TypeCert:
		for pager := vc.certs.NewListCertificatePropertiesVersionsPager(o.ObjectName, nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, c := range page.Value {
				if c.ID != nil && c.Attributes != nil {
					add(c.ID.Version(), c.Attributes.Created, c.Attributes.Enabled)
				}
			}
		}
	default:
		for pager := vc.client.NewListSecretPropertiesVersionsPager(o.ObjectName, nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, err
			}
			for _, s := range page.Value {
				if s.ID != nil && s.Attributes != nil {
					add(s.ID.Version(), s.Attributes.Created, s.Attributes.Enabled)
				}
			}
		}
	}
	return out, nil
}
