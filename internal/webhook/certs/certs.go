// Package certs gives the manager's webhooks their TLS without cert-manager: a CA kept in a
// Secret that every replica shares, a serving certificate each replica issues itself from it, the
// CA bundle injected into the webhook configurations, and rotation of both before they expire.
//
// Rotation never breaks a call in flight: a new CA joins the bundle beside the old one (which
// stays until it expires), and a replica serves a leaf of the new CA only after it has seen the
// bundle with that CA in every webhook configuration.
package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cerulean/cerulean/internal/pki"
)

// Keys of the CA Secret.
const (
	CACertKey   = "ca.crt"        // the current CA
	CAKeyKey    = "ca.key"        // its private key
	CABundleKey = "ca-bundle.crt" // every CA still valid, current first: what clients trust
)

// Defaults of Options.
const (
	DefaultSecretName   = "cerulean-webhook-ca"
	DefaultCAValidity   = 365 * 24 * time.Hour
	DefaultCertValidity = 30 * 24 * time.Hour
	DefaultInterval     = time.Minute
)

// ErrDamagedSecret reports a CA Secret that cannot be read back. It is never replaced silently:
// delete it to start over with a new CA.
var ErrDamagedSecret = errors.New("damaged webhook CA secret")

// Options configure a Rotator.
type Options struct {
	// Namespace and SecretName locate the CA Secret (SecretName defaults to DefaultSecretName).
	Namespace  string
	SecretName string
	// MutatingWebhooks and ValidatingWebhooks name the configurations whose every webhook gets
	// the CA bundle. A configuration that does not exist yet is skipped.
	MutatingWebhooks   []string
	ValidatingWebhooks []string
	// DNSNames and IPAddresses are the serving certificate's names (the Service's DNS names in a
	// cluster; 127.0.0.1 under `cerulean-local up`).
	DNSNames    []string
	IPAddresses []net.IP
	// CAValidity and CertValidity default to a year and 30 days. Each is renewed once less
	// than a third of its validity remains.
	CAValidity   time.Duration
	CertValidity time.Duration
	// Interval between checks in Start; default a minute.
	Interval time.Duration
	// Clock decides validity and renewal; default the real clock.
	Clock clock.PassiveClock
}

// Rotator keeps the CA Secret, the webhook configurations' CA bundle and this replica's serving
// certificate current. It is a manager.Runnable that runs on every replica.
type Rotator struct {
	c    client.Client
	opts Options

	mu     sync.RWMutex
	leaf   *tls.Certificate
	issuer []byte // raw CA certificate that signed leaf
	bundle []byte
}

// New checks the options; nothing is created until Ensure or Start.
func New(c client.Client, opts Options) (*Rotator, error) {
	if opts.Namespace == "" {
		return nil, errors.New("webhook certificates: no namespace for the CA secret")
	}
	if len(opts.DNSNames) == 0 && len(opts.IPAddresses) == 0 {
		return nil, errors.New("webhook certificates: no DNS name or IP address to serve under")
	}
	if opts.SecretName == "" {
		opts.SecretName = DefaultSecretName
	}
	if opts.CAValidity == 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.CertValidity == 0 {
		opts.CertValidity = DefaultCertValidity
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Rotator{c: c, opts: opts}, nil
}

// Start runs Ensure now and then every Interval until ctx ends. A failed check is logged and
// retried at the next one: the certificate in use stays valid well beyond an interval.
func (r *Rotator) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("webhook-certs")
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		if err := r.Ensure(ctx); err != nil {
			log.Error(err, "Cannot renew webhook certificates")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is false: every replica serves, so every replica needs its certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// TLSOpt sets the server's certificate source: pass it in webhook.Options.TLSOpts.
func (r *Rotator) TLSOpt(c *tls.Config) { c.GetCertificate = r.GetCertificate }

// GetCertificate returns the current serving certificate.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.leaf == nil {
		return nil, errors.New("webhook serving certificate not issued yet")
	}
	return r.leaf, nil
}

// CABundle is the PEM bundle clients must trust (empty before the first Ensure).
func (r *Rotator) CABundle() []byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return bytes.Clone(r.bundle)
}

// Ensure makes one pass: the CA Secret exists and its CA is not due for renewal, the bundle is
// in every webhook configuration, and this replica's certificate is from the current CA and not
// due for renewal.
func (r *Rotator) Ensure(ctx context.Context) error {
	ca, bundle, err := r.ensureCA(ctx)
	if err != nil {
		return err
	}
	if err := r.inject(ctx, bundle); err != nil {
		return err
	}
	r.mu.Lock()
	r.bundle = bundle
	r.mu.Unlock()
	return r.ensureLeaf(ca)
}

// due reports whether a certificate issued for validity has less than a third of it left.
func (r *Rotator) due(c *x509.Certificate, validity time.Duration) bool {
	return r.opts.Clock.Now().After(c.NotAfter.Add(-validity / 3))
}

func (r *Rotator) ensureCA(ctx context.Context) (*pki.CA, []byte, error) {
	key := client.ObjectKey{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	var ca *pki.CA
	var bundle []byte
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		s := &corev1.Secret{}
		err := r.c.Get(ctx, key, s)
		if apierrors.IsNotFound(err) {
			ca, bundle, err = r.newCA(nil)
			if err != nil {
				return err
			}
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{"app.kubernetes.io/name": "cerulean"}}}
			if err := fill(s, ca, bundle); err != nil {
				return err
			}
			return r.c.Create(ctx, s) // AlreadyExists: another replica won; read its CA
		}
		if err != nil {
			return fmt.Errorf("get secret %s: %w", key, err)
		}
		if len(s.Data[CACertKey]) == 0 && len(s.Data[CAKeyKey]) == 0 && len(s.Data[CABundleKey]) == 0 {
			// An empty Secret (the Helm chart's, so that uninstalling removes it): the first CA.
			if ca, bundle, err = r.newCA(nil); err != nil {
				return err
			}
			if err := fill(s, ca, bundle); err != nil {
				return err
			}
			return r.c.Update(ctx, s) // Conflict: another replica filled it; read its CA
		}
		cur, err := pki.ParseCA(s.Data[CACertKey], s.Data[CAKeyKey])
		if err != nil {
			return fmt.Errorf("%w %s: %w (delete it to create a new CA)", ErrDamagedSecret, key, err)
		}
		olds, err := parseBundle(s.Data[CABundleKey])
		if err != nil {
			return fmt.Errorf("%w %s: %w (delete it to create a new CA)", ErrDamagedSecret, key, err)
		}
		ca, bundle = cur, encodeBundle(cur.Cert, r.valid(olds, cur.Cert))
		if r.due(cur.Cert, r.opts.CAValidity) {
			if ca, bundle, err = r.newCA(append([]*x509.Certificate{cur.Cert}, olds...)); err != nil {
				return err
			}
		} else if bytes.Equal(bundle, s.Data[CABundleKey]) {
			return nil
		}
		if err := fill(s, ca, bundle); err != nil {
			return err
		}
		return r.c.Update(ctx, s) // Conflict: another replica changed it; start over
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ensure webhook CA: %w", err)
	}
	if ca == nil {
		return nil, nil, errors.New("ensure webhook CA: no CA after reading the secret")
	}
	return ca, bundle, nil
}

// newCA creates a CA and its bundle: it first, then the previous CAs still valid.
func (r *Rotator) newCA(previous []*x509.Certificate) (*pki.CA, []byte, error) {
	now := r.opts.Clock.Now()
	ca, err := pki.NewCA(pkix.Name{CommonName: "cerulean-webhook-ca@" + now.UTC().Format(time.RFC3339)}, now, r.opts.CAValidity)
	if err != nil {
		return nil, nil, err
	}
	return ca, encodeBundle(ca.Cert, r.valid(previous, ca.Cert)), nil
}

// valid keeps the certificates not expired and not cur.
func (r *Rotator) valid(certs []*x509.Certificate, cur *x509.Certificate) []*x509.Certificate {
	now := r.opts.Clock.Now()
	var out []*x509.Certificate
	for _, c := range certs {
		if now.Before(c.NotAfter) && !c.Equal(cur) && !containsCert(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

func fill(s *corev1.Secret, ca *pki.CA, bundle []byte) error {
	keyPEM, err := pki.EncodeKey(ca.Key)
	if err != nil {
		return err
	}
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{CACertKey: ca.PEM(), CAKeyKey: keyPEM, CABundleKey: bundle}
	return nil
}

func encodeBundle(cur *x509.Certificate, others []*x509.Certificate) []byte {
	out := pki.EncodeCert(cur.Raw)
	for _, c := range others {
		out = append(out, pki.EncodeCert(c.Raw)...)
	}
	return out
}

func parseBundle(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return certs, nil
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse CA bundle: %w", err)
		}
		certs = append(certs, c)
	}
}

// inject writes bundle into every webhook of the named configurations where it differs.
func (r *Rotator) inject(ctx context.Context, bundle []byte) error {
	for _, name := range r.opts.MutatingWebhooks {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		err := r.injectInto(ctx, name, cfg, bundle, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		})
		if err != nil {
			return fmt.Errorf("inject CA bundle into mutating webhook configuration %s: %w", name, err)
		}
	}
	for _, name := range r.opts.ValidatingWebhooks {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		err := r.injectInto(ctx, name, cfg, bundle, func() []*admissionregistrationv1.WebhookClientConfig {
			out := make([]*admissionregistrationv1.WebhookClientConfig, len(cfg.Webhooks))
			for i := range cfg.Webhooks {
				out[i] = &cfg.Webhooks[i].ClientConfig
			}
			return out
		})
		if err != nil {
			return fmt.Errorf("inject CA bundle into validating webhook configuration %s: %w", name, err)
		}
	}
	return nil
}

// injectInto reads the configuration name into cfg and updates it when one of its webhooks'
// client configs (as clientConfigs lists them, after the read) holds another bundle.
func (r *Rotator) injectInto(ctx context.Context, name string, cfg client.Object, bundle []byte, clientConfigs func() []*admissionregistrationv1.WebhookClientConfig) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.c.Get(ctx, client.ObjectKey{Name: name}, cfg); err != nil {
			return client.IgnoreNotFound(err)
		}
		changed := false
		for _, cc := range clientConfigs() {
			if !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, changed = bundle, true
			}
		}
		if !changed {
			return nil
		}
		return r.c.Update(ctx, cfg)
	})
}

// ensureLeaf issues this replica's serving certificate when it has none, when the CA changed or
// when it is due. It never outlives its CA.
func (r *Rotator) ensureLeaf(ca *pki.CA) error {
	r.mu.RLock()
	leaf, issuer := r.leaf, r.issuer
	r.mu.RUnlock()
	if leaf != nil && bytes.Equal(issuer, ca.Cert.Raw) && !r.due(leaf.Leaf, r.opts.CertValidity) {
		return nil
	}
	now := r.opts.Clock.Now()
	validFor := r.opts.CertValidity
	if rest := ca.Cert.NotAfter.Sub(now); rest < validFor {
		validFor = rest
	}
	name := "cerulean-webhook"
	if len(r.opts.DNSNames) > 0 {
		name = r.opts.DNSNames[0]
	}
	der, key, err := ca.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    r.opts.DNSNames,
		IPAddresses: r.opts.IPAddresses,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, validFor)
	if err != nil {
		return fmt.Errorf("issue webhook serving certificate: %w", err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("issue webhook serving certificate: %w", err)
	}
	r.mu.Lock()
	r.leaf = &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}
	r.issuer = ca.Cert.Raw
	r.mu.Unlock()
	return nil
}
