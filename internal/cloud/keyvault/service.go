// Package keyvault is the local cloud's Key Vault data plane (secrets). Every vault is served on
// an origin of its own, https://127.0.0.1:PORT/, because the SDKs read a secret's name and version
// from fixed path segments and so cannot address a vault under a path prefix. The port is chosen
// when the vault is created, kept in the store, and listened on again at every start, so a
// vaultUri stays valid across restarts.
//
// A request is answered in this order: the vault (from the registry the management plane
// writes), the bearer token (401 with the challenge otherwise), the request line, the caller's
// permission (RBAC data actions or the vault's access policies), and only then the body and the
// secret itself, so a denied caller learns nothing about which names exist.
package keyvault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/ratelimit"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Versions this data plane reports and suggests.
const (
	serviceVersion   = "1.9.0.0"
	latestAPIVersion = "2026-04-01"
)

// Options configure the service.
type Options struct {
	Store        *store.Store
	Tokens       TokenVerifier
	Authz        DataAuthorizer
	AuthorityURL string      // Entra ID's https://HOST:PORT, named in the 401 challenge
	TLS          *tls.Config // the serving certificate, from the cloud's CA, valid for 127.0.0.1
	Clock        func() time.Time
	Logger       *slog.Logger // never receives secret values or tokens
	Limits       *Limits      // per-vault throttling; nil = none (the default)
	// Middleware, when set, wraps every vault's handler (the cloud's request log and faults).
	Middleware func(vault string, h http.Handler) http.Handler
}

// Service is the Key Vault data plane of every vault of the cloud.
type Service struct {
	o       Options
	log     *slog.Logger
	now     func() time.Time
	sealer  *sealer
	buckets *ratelimit.Buckets

	mu      sync.Mutex
	servers map[string]*vaultServer // by lower-case vault name
	closed  bool

	stopSweep context.CancelFunc // ends the sweeper; nil before Start
	swept     chan struct{}      // closed when the sweeper has returned
}

// New loads the service's state; vaults are served from Start on.
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Store == nil || o.Tokens == nil || o.Authz == nil || o.TLS == nil {
		return nil, errors.New("keyvault: Store, Tokens, Authz and TLS are required")
	}
	sl, err := newSealer(ctx, o.Store)
	if err != nil {
		return nil, err
	}
	return &Service{o: o, log: o.Logger, now: o.Clock, sealer: sl, buckets: ratelimit.New(o.Clock), servers: map[string]*vaultServer{}}, nil
}

// Vault returns the vault with this name, active or deleted.
func (s *Service) Vault(ctx context.Context, name string) (Vault, error) {
	var v Vault
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		var err error
		v, err = GetVaultTx(tx, name)
		return err
	})
	return v, err
}

// PublicHandler serves the named vault for requests that reach it as NAME.vault.azure.net
// (the cloud's proxy hands it connections for that name); ErrVaultNotFound when no active vault
// has the name.
func (s *Service) PublicHandler(ctx context.Context, name string) (http.Handler, error) {
	v, err := s.Vault(ctx, name)
	if err != nil {
		return nil, err
	}
	if v.IsDeleted() {
		return nil, ErrVaultNotFound
	}
	return s.handler(v.Name), nil
}

// handler serves one vault's origin. It ends in httpx.CompleteBody, so whoever serves it (the
// vault's listener, or another front) gets answers that arrive whole over HTTP/2.
func (s *Service) handler(name string) http.Handler {
	log := s.log.With("vault", name)
	h := httpx.Adapt(log, func(r *http.Request) (httpx.Response, error) {
		res, err := s.serve(r, name)
		if res.Header == nil {
			res.Header = http.Header{}
		}
		res.Header.Set("X-Ms-Keyvault-Service-Version", serviceVersion)
		res.Header.Set("X-Ms-Request-Id", uuid.NewString())
		return res, err
	}, writeError(log))
	if s.o.Middleware != nil {
		h = s.o.Middleware(name, h)
	}
	return httpx.CompleteBody(h)
}

func (s *Service) serve(r *http.Request, name string) (httpx.Response, error) {
	ctx := r.Context()
	v, err := s.Vault(ctx, name)
	if errors.Is(err, ErrVaultNotFound) || err == nil && v.IsDeleted() {
		// The vault went away with its resource group (or was deleted while this connection
		// was open): its origin goes away too.
		go s.stopIfGone(context.WithoutCancel(ctx), name)
		return httpx.Response{}, errorf(http.StatusNotFound, "VaultNotFound", "The vault %s does not exist.", name)
	} else if err != nil {
		return httpx.Response{}, err
	}
	if n, ok := azurenames.VaultName(azurenames.RequestHost(r)); ok && strings.EqualFold(n, v.Name) {
		v.public = true
	}
	c, err := s.authenticate(r, v)
	if err != nil {
		return httpx.Response{}, err
	}
	reqlog.SetPrincipal(ctx, c.ObjectID)
	if err := s.throttle(v.Name); err != nil {
		return httpx.Response{}, err
	}
	rt, err := parseRoute(r.Method, r.URL.EscapedPath(), r.URL.RawQuery)
	if err != nil {
		return httpx.Response{}, err
	}
	if err := s.authorize(ctx, v, c, rt); err != nil {
		return httpx.Response{}, err
	}
	limit := int64(maxBody)
	if rt.op == opRestore || rt.op == opKeyRestore || rt.op == opCertRestore {
		limit = maxRestoreBody
	}
	var body []byte
	if hasBody(rt.op) {
		body, err = httpx.ReadBody(r, limit)
		if errors.Is(err, httpx.ErrTooLarge) {
			return httpx.Response{}, errBadParameter("The request body exceeds the maximum size of %d bytes.", limit)
		} else if err != nil {
			return httpx.Response{}, errBadParameter("The request body could not be read.")
		}
	}
	return s.exec(ctx, v, rt, body)
}

// exec runs a parsed, authorized operation.
func (s *Service) exec(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	switch rt.kind {
	case kindKey:
		return s.execKey(ctx, v, rt, body)
	case kindCert:
		return s.execCert(ctx, v, rt, body)
	}
	switch rt.op {
	case opSet:
		b, err := parseSetBody(body)
		if err != nil {
			return httpx.Response{}, err
		}
		return s.write(ctx, v, func(sc secrets) (any, error) {
			h, ver, err := sc.set(rt.name, b)
			return bundle(v, h, ver, true), err
		})
	case opUpdate:
		b, err := parseUpdateBody(body)
		if err != nil {
			return httpx.Response{}, err
		}
		return s.write(ctx, v, func(sc secrets) (any, error) {
			h, ver, err := sc.update(rt.name, rt.version, b)
			return bundle(v, h, ver, false), err
		})
	case opGet:
		return s.read(ctx, v, func(sc secrets) (any, error) { return s.get(sc, rt) })
	case opList, opListDeleted:
		return s.read(ctx, v, func(sc secrets) (any, error) { return listNames(sc, rt) })
	case opListVersions:
		return s.read(ctx, v, func(sc secrets) (any, error) { return listVersions(sc, rt) })
	case opDelete:
		return s.write(ctx, v, func(sc secrets) (any, error) {
			h, ver, err := sc.softDelete(rt.name)
			if err == nil && !v.SoftDelete {
				return bundle(v, h, ver, false), nil
			}
			return deletedBundle(v, h, ver), err
		})
	case opGetDeleted:
		return s.read(ctx, v, func(sc secrets) (any, error) {
			h, err := sc.deleted(rt.name)
			if err != nil {
				return nil, err
			}
			ver, err := sc.version(h, "")
			return deletedBundle(v, h, ver), err
		})
	case opRecover:
		return s.write(ctx, v, func(sc secrets) (any, error) {
			h, ver, err := sc.recover(rt.name)
			return bundle(v, h, ver, false), err
		})
	case opPurge:
		return s.purge(ctx, v, rt.name)
	case opBackup:
		return s.backup(ctx, v, rt.name)
	case opRestore:
		blob, err := parseRestoreBody(body)
		if err != nil {
			return httpx.Response{}, err
		}
		b, err := s.sealer.unseal(blob)
		if err != nil {
			return httpx.Response{}, err
		}
		return s.write(ctx, v, func(sc secrets) (any, error) {
			h, ver, err := sc.restore(b)
			return bundle(v, h, ver, false), err
		})
	}
	return httpx.Response{}, errNotFound()
}

func (s *Service) secrets(tx *store.Tx, v Vault) secrets {
	return secrets{tx: tx, vault: v, now: s.now().Unix()}
}

// read answers from a read-only transaction.
func (s *Service) read(ctx context.Context, v Vault, fn func(secrets) (any, error)) (httpx.Response, error) {
	var out any
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		var err error
		out, err = fn(s.secrets(tx, v))
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: out}, nil
}

// write answers only after its transaction is on disk, so an acknowledged write survives a
// crash; an error rolls everything back, so a rejected request writes nothing.
func (s *Service) write(ctx context.Context, v Vault, fn func(secrets) (any, error)) (httpx.Response, error) {
	var out any
	err := s.o.Store.Update(ctx, func(tx *store.Tx) error {
		// The vault may have been deleted since the request started.
		cur, err := GetVaultTx(tx, v.Name)
		if err != nil || cur.IsDeleted() {
			return errorf(http.StatusNotFound, "VaultNotFound", "The vault %s does not exist.", v.Name)
		}
		out, err = fn(s.secrets(tx, cur))
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: out}, nil
}

// get returns a version with its value, honouring its attributes: a disabled secret, or one
// outside its nbf/exp window, is not returned.
func (s *Service) get(sc secrets, rt route) (any, error) {
	h, err := sc.active(rt.name)
	if err != nil {
		return nil, err
	}
	ver, err := sc.version(h, rt.version)
	if err != nil {
		return nil, err
	}
	switch {
	case !ver.Enabled:
		return nil, errorf(http.StatusForbidden, "Forbidden", "Operation get is not allowed on a disabled secret.").inner("SecretDisabled")
	case ver.NotBefore != nil && sc.now < *ver.NotBefore:
		return nil, errorf(http.StatusForbidden, "Forbidden", "Operation get is not allowed on a secret before its activation date (nbf).").inner("SecretNotYetValid")
	case ver.Expires != nil && sc.now >= *ver.Expires:
		return nil, errorf(http.StatusForbidden, "Forbidden", "Operation get is not allowed on an expired secret.").inner("SecretExpired")
	}
	return bundle(sc.vault, h, ver, true), nil
}

func (s *Service) purge(ctx context.Context, v Vault, name string) (httpx.Response, error) {
	if v.PurgeProtection {
		return httpx.Response{}, errorf(http.StatusForbidden, "Forbidden",
			"Operation 'purge' is not allowed on vault %s because purge protection is enabled; the secret will be purged at its scheduled purge date.", v.Name).inner("OperationNotAllowed")
	}
	res, err := s.write(ctx, v, func(sc secrets) (any, error) {
		if _, err := sc.deleted(name); err != nil {
			return nil, err
		}
		return nil, sc.purge(name)
	})
	res.Status = http.StatusNoContent
	return res, err
}

func (s *Service) backup(ctx context.Context, v Vault, name string) (httpx.Response, error) {
	var b backupOf
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		var err error
		b, err = s.secrets(tx, v).backup(name)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	blob, err := s.sealer.seal(b)
	if err != nil {
		return httpx.Response{}, err
	}
	if len(blob) > maxBackupBlobBytes {
		return httpx.Response{}, errBadParameter("The secret %s has too many versions to back up.", b.Name)
	}
	return httpx.Response{Body: map[string]string{"value": encodeBlob(blob)}}, nil
}

// Close stops serving every vault.
func (s *Service) Close() error {
	if s.stopSweep != nil {
		s.stopSweep()
		<-s.swept
		s.stopSweep = nil
	}
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.servers = map[string]*vaultServer{}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, vs := range servers {
		if err := vs.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop vault listeners: %w", err)
	}
	return nil
}
