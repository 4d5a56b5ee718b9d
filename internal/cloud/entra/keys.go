package entra

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"math/big"
	"sort"
	"sync"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

const bucketKeys = "entra.signingKeys"

// signingKey is a token-signing key as stored.
type signingKey struct {
	ID      string    `json:"kid"`
	PKCS8   []byte    `json:"pkcs8"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"` // zero while the key signs

	priv *rsa.PrivateKey
}

// keyRing signs with the newest key and publishes every key whose tokens may still be valid: a
// key is replaced after rotateAfter, and stays published for the token lifetime plus skew after
// that, so resource servers can verify every token they may still receive.
type keyRing struct {
	st          *store.Store
	now         func() time.Time
	rotateAfter time.Duration
	keepAfter   time.Duration

	mu   sync.Mutex
	keys []*signingKey // oldest first; the last one signs
}

func newKeyRing(ctx context.Context, st *store.Store, now func() time.Time, rotateAfter, keepAfter time.Duration) (*keyRing, error) {
	r := &keyRing{st: st, now: now, rotateAfter: rotateAfter, keepAfter: keepAfter}
	err := st.View(ctx, func(tx *store.Tx) error {
		return tx.ForEach(bucketKeys, "", func(_ string, decode func(any) error) error {
			var k signingKey
			if err := decode(&k); err != nil {
				return err
			}
			priv, err := x509.ParsePKCS8PrivateKey(k.PKCS8)
			if err != nil {
				return fmt.Errorf("parse signing key %s: %w", k.ID, err)
			}
			rk, ok := priv.(*rsa.PrivateKey)
			if !ok {
				return fmt.Errorf("signing key %s is not RSA", k.ID)
			}
			k.priv = rk
			r.keys = append(r.keys, &k)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("load signing keys: %w", err)
	}
	// Retired keys first, oldest first; the one key still signing last. Creation times alone can tie
	// (an injected clock that does not move), so retirement decides.
	sort.SliceStable(r.keys, func(i, j int) bool {
		a, b := r.keys[i], r.keys[j]
		if a.Retired.IsZero() != b.Retired.IsZero() {
			return !a.Retired.IsZero()
		}
		return a.Created.Before(b.Created)
	})
	if _, err := r.signer(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// signer returns the key that signs now, rotating first when the current one is due.
func (r *keyRing) signer(ctx context.Context) (*signingKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if n := len(r.keys); n > 0 && now.Before(r.keys[n-1].Created.Add(r.rotateAfter)) {
		return r.keys[n-1], nil
	}
	if err := r.rotateLocked(ctx, now); err != nil {
		return nil, err
	}
	return r.keys[len(r.keys)-1], nil
}

// Rotate replaces the signing key now.
func (r *keyRing) Rotate(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rotateLocked(ctx, r.now())
}

func (r *keyRing) rotateLocked(ctx context.Context, now time.Time) error {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("encode signing key: %w", err)
	}
	sum := sha256.Sum256(x509.MarshalPKCS1PublicKey(&priv.PublicKey))
	nk := &signingKey{ID: base64.RawURLEncoding.EncodeToString(sum[:20]), PKCS8: der, Created: now.UTC(), priv: priv}
	var kept, dropped []*signingKey
	for _, k := range r.keys {
		old := *k
		if old.Retired.IsZero() {
			old.Retired = now.UTC()
		}
		if now.Before(old.Retired.Add(r.keepAfter)) {
			kept = append(kept, &old)
		} else {
			dropped = append(dropped, &old)
		}
	}
	err = r.st.Update(ctx, func(tx *store.Tx) error {
		for _, k := range kept {
			if err := tx.Put(bucketKeys, k.ID, k); err != nil {
				return err
			}
		}
		for _, k := range dropped {
			if err := tx.Delete(bucketKeys, k.ID); err != nil {
				return err
			}
		}
		return tx.Put(bucketKeys, nk.ID, nk)
	})
	if err != nil {
		return fmt.Errorf("store signing key: %w", err)
	}
	r.keys = append(kept, nk)
	return nil
}

// published returns the keys a verifier may need now.
func (r *keyRing) published() []*signingKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []*signingKey
	for _, k := range r.keys {
		if k.Retired.IsZero() || now.Before(k.Retired.Add(r.keepAfter)) {
			out = append(out, k)
		}
	}
	return out
}

// publicKey finds a published key by kid.
func (r *keyRing) publicKey(kid string) (*rsa.PublicKey, bool) {
	for _, k := range r.published() {
		if k.ID == kid {
			return &k.priv.PublicKey, true
		}
	}
	return nil, false
}

// jwk is one entry of the JWKS document.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	N   string `json:"n"`
	E   string `json:"e"`
}

func (r *keyRing) jwks() map[string][]jwk {
	keys := []jwk{}
	for _, k := range r.published() {
		pub := k.priv.PublicKey
		keys = append(keys, jwk{
			Kty: "RSA", Use: "sig", Alg: "RS256", Kid: k.ID,
			N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
			E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
		})
	}
	return map[string][]jwk{"keys": keys}
}
