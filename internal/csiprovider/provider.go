// Package csiprovider is the Secrets Store CSI Driver provider for Key Vault: the driver's
// v1alpha1.CSIDriverProvider gRPC service, with the upstream Azure provider's parameters, and a
// cache that makes a rotation cost one Key Vault GET per distinct object and identity instead of
// one per pod.
package csiprovider

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azcertificates"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azkeys"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/version"
)

// Errors a mount reports, besides Key Vault's own answers.
var (
	ErrVaultNotFound  = errors.New("vault not found")
	ErrUnsupported    = errors.New("object type not supported")
	ErrDecode         = errors.New("decode object")
	ErrMountTooLarge  = errors.New("mount too large")
	ErrObjectNotFound = errors.New("object not found")
)

// MaxMountBytes bounds the files of one mount: the driver syncs them into Kubernetes Secrets,
// which hold at most 1 MiB.
const MaxMountBytes = 1 << 20

// Options configure a Provider.
type Options struct {
	// Azure is the provider's own cloud, meant by an empty cloudName: its authority host and CA
	// (the local cloud's, or empty for Azure's public cloud).
	Azure azure.Config
	// CloudName is the name a SecretProviderClass may give the provider's own cloud
	// (default "AzurePublicCloud"; the local cloud calls itself "Cerulean").
	CloudName string
	// VaultLookupURL is the local cloud's vault lookup (https://HOST:PORT/_cerulean/vaults/):
	// vaults there are addressed by port, not by NAME.vault.azure.net. Empty in Azure.
	VaultLookupURL string
	// PodIdentityEndpoint is the node agent's address for usePodIdentity
	// (default http://127.0.0.1:2579, aad-pod-identity's NMI port).
	PodIdentityEndpoint string
	// ManagedIdentity builds the credential of a useVMManagedIdentity mount for the identity its
	// class selects (userAssignedIdentityID: a client id, an identity's resource id, or empty
	// for the node's system-assigned or only identity). Nil: azidentity's
	// ManagedIdentityCredential, which finds the node's endpoint as the SDK does (IMDS on an
	// Azure VM, or IDENTITY_ENDPOINT / IDENTITY_HEADER). `cerulean-local up` gives its node's scale set here.
	ManagedIdentity func(userAssignedIdentityID string) (azcore.TokenCredential, error)
	// CacheTTL is how long an unpinned object (the latest version) is served from the cache
	// before it is fetched again; the staleness bound. 0 turns the cache off: every mount
	// exchanges its token and GETs every object, as the upstream provider does.
	CacheTTL time.Duration
	// CacheEntries bounds the object cache (default 10000).
	CacheEntries int
	// Retry is azcore's retry policy for Key Vault; 429 and 503 are retried honouring
	// Retry-After (default: 6 tries, up to 60 s apart).
	Retry policy.RetryOptions
	// MetricsAddr is where Run serves /metrics (keyvault_request, grpc_request); "" or "0" none.
	MetricsAddr string
	Clock       func() time.Time
	Logger      *slog.Logger
}

// Provider serves Mount and Version.
type Provider struct {
	v1alpha1.UnimplementedCSIDriverProviderServer

	o      Options
	home   cloudEnv
	http   *http.Client
	prover *prover
	cache  *objectCache

	mu      sync.Mutex
	clients map[string]*vaultClient // by identity and vault URI
}

type vaultClient struct {
	client *azsecrets.Client
	keys   *azkeys.Client
	certs  *azcertificates.Client
	cred   *staticToken
}

// New builds a Provider.
func New(o Options) (*Provider, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CloudName == "" {
		o.CloudName = "AzurePublicCloud"
	}
	if o.PodIdentityEndpoint == "" {
		o.PodIdentityEndpoint = "http://127.0.0.1:2579"
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = 10000
	}
	if o.Retry.MaxRetries == 0 {
		o.Retry.MaxRetries = 5
	}
	if o.Retry.MaxRetryDelay == 0 {
		o.Retry.MaxRetryDelay = time.Minute
	}
	o.Retry.StatusCodes = []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	opts, err := o.Azure.ClientOptions()
	if err != nil {
		return nil, err
	}
	hc := http.DefaultClient
	if c, ok := opts.Transport.(*http.Client); ok {
		hc = c
	}
	home := knownClouds["azurepubliccloud"]
	if !o.Azure.IsPublic() {
		home = cloudEnv{authority: o.Azure.AuthorityHost, keyVaultScope: "https://vault.azure.net/.default", lookupURL: o.VaultLookupURL}
		if o.VaultLookupURL == "" {
			return nil, fmt.Errorf("%w: a non-public cloud needs VaultLookupURL", azure.ErrIncomplete)
		}
	}
	p := &Provider{o: o, home: home, http: hc, cache: newObjectCache(o.CacheEntries, o.Clock), clients: map[string]*vaultClient{}}
	p.prover = &prover{azure: o.Azure, podURL: o.PodIdentityEndpoint, managedIdentity: o.ManagedIdentity, now: o.Clock, cache: o.CacheTTL > 0,
		proofs: map[string]proof{}, mis: map[string]azcore.TokenCredential{}}
	return p, nil
}

// Version implements v1alpha1.CSIDriverProviderServer.
func (p *Provider) Version(context.Context, *v1alpha1.VersionRequest) (*v1alpha1.VersionResponse, error) {
	return &v1alpha1.VersionResponse{Version: "v1alpha1", RuntimeName: "cerulean-csi-provider", RuntimeVersion: version.Version}, nil
}

// Mount implements v1alpha1.CSIDriverProviderServer: it fetches every object of the request and
// answers with all the files, or with an error naming the first object that failed and no file.
func (p *Provider) Mount(ctx context.Context, req *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	m, err := parseMount(req.GetAttributes(), req.GetSecrets(), req.GetPermission())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	log := p.o.Logger.With("pod", m.podNamespace+"/"+m.podName, "vault", m.vaultName, "auth", string(m.mode))
	start := p.o.Clock()
	resp, err := p.mount(ctx, m)
	if err != nil {
		log.Info("Mount failed", "error", err.Error())
		return nil, status.Error(grpcCode(err), err.Error())
	}
	log.Debug("Mounted", "objects", len(m.objects), "files", len(resp.Files), "duration", p.o.Clock().Sub(start))
	return resp, nil
}

func (p *Provider) mount(ctx context.Context, m *mount) (*v1alpha1.MountResponse, error) {
	c, err := p.cloudFor(m.cloudName)
	if err != nil {
		return nil, err
	}
	uri, err := p.vaultURI(ctx, c, m.vaultName)
	if err != nil {
		return nil, err
	}
	pr, err := p.prover.prove(ctx, c, m)
	if err != nil {
		return nil, err
	}
	vc, err := p.client(pr, uri)
	if err != nil {
		return nil, err
	}
	results := make([][]fetched, len(m.objects))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, o := range m.objects {
		g.Go(func() error {
			r, err := p.object(gctx, vc, pr.identity, uri, m.vaultName, o)
			if err != nil {
				return err
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	resp := &v1alpha1.MountResponse{}
	total := 0
	ids := map[string]bool{}
	for i, o := range m.objects {
		mode, err := o.Mode(m.permission)
		if err != nil {
			return nil, err
		}
		history := o.ObjectVersionHistory > 1
		base := o.UID()
		if ids[base] { // the same object again under another alias: keep both ids apart
			base += "/" + o.FileName()
		}
		ids[base] = true
		for j, f := range results[i] {
			content, err := decode(f.value, o)
			if err != nil {
				return nil, err
			}
			total += len(content)
			if total > MaxMountBytes {
				return nil, fmt.Errorf("%w: the files of this mount exceed %d bytes at %s", ErrMountTooLarge, MaxMountBytes, o)
			}
			file, uid := o.FileName(), base
			if history {
				file, uid = path.Join(file, strconv.Itoa(j)), uid+"/"+strconv.Itoa(j)
			}
			resp.Files = append(resp.Files, &v1alpha1.File{Path: file, Mode: int32(mode & os.ModePerm), Contents: content})
			resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: uid, Version: f.version})
		}
	}
	return resp, nil
}

// client is the azsecrets client of an identity for a vault, shared by every mount that proved
// that identity (one challenge round trip per identity and vault, not per mount).
func (p *Provider) client(pr proof, uri string) (*vaultClient, error) {
	key := pr.identity + " " + uri
	p.mu.Lock()
	defer p.mu.Unlock()
	if vc, ok := p.clients[key]; ok {
		vc.cred.set(pr.token)
		return vc, nil
	}
	opts, err := p.o.Azure.SecretsOptions()
	if err != nil {
		return nil, err
	}
	opts.Retry = p.o.Retry
	opts.DisableChallengeResourceVerification = p.home.vaultSuffix == "" || opts.DisableChallengeResourceVerification
	cred := &staticToken{}
	cred.set(pr.token)
	c, err := azsecrets.NewClient(uri, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("create Key Vault client: %w", err)
	}
	kc, err := azkeys.NewClient(uri, cred, &azkeys.ClientOptions{ClientOptions: opts.ClientOptions, DisableChallengeResourceVerification: opts.DisableChallengeResourceVerification})
	if err != nil {
		return nil, fmt.Errorf("create Key Vault client: %w", err)
	}
	cc, err := azcertificates.NewClient(uri, cred, &azcertificates.ClientOptions{ClientOptions: opts.ClientOptions, DisableChallengeResourceVerification: opts.DisableChallengeResourceVerification})
	if err != nil {
		return nil, fmt.Errorf("create Key Vault client: %w", err)
	}
	vc := &vaultClient{client: c, keys: kc, certs: cc, cred: cred}
	p.clients[key] = vc
	return vc, nil
}

// fetched is one version of an object as Key Vault returned it.
type fetched struct {
	value   string
	version string
}

// object returns the object's versions (one, or objectVersionHistory of them), from the cache
// when an entry of this identity is fresh.
func (p *Provider) object(ctx context.Context, vc *vaultClient, identity, uri, vault string, o Object) ([]fetched, error) {
	key := strings.Join([]string{identity, uri, o.ObjectType, o.ObjectName, o.ObjectVersion, strconv.Itoa(int(o.ObjectVersionHistory)), o.ObjectFormat}, "\x00")
	fetch := func() (_ []fetched, err error) {
		start := time.Now()
		defer func() { reportKeyvault(o, time.Since(start), err) }()
		if o.ObjectVersionHistory > 1 {
			return p.history(ctx, vc, vault, o)
		}
		f, err := p.fetchVersion(ctx, vc, vault, o, o.ObjectVersion)
		if err != nil {
			return nil, err
		}
		return []fetched{f}, nil
	}
	if p.o.CacheTTL <= 0 {
		return fetch()
	}
	ttl := p.o.CacheTTL
	if o.ObjectVersion != "" {
		ttl = 0 // pinned: a version's value never changes
	}
	return p.cache.get(key, ttl, fetch)
}

func (p *Provider) secret(ctx context.Context, vc *vaultClient, vault string, o Object, version string) (fetched, error) {
	resp, err := vc.client.GetSecret(ctx, o.ObjectName, version, nil)
	if err != nil {
		return fetched{}, kvError(err, o, vault)
	}
	if resp.Value == nil {
		return fetched{}, fmt.Errorf("get %s from vault %q: the answer has no value", o, vault)
	}
	f := fetched{value: *resp.Value}
	if resp.ID != nil {
		f.version = resp.ID.Version()
	}
	if resp.KID != nil && *resp.KID != "" {
		v, err := certificateSecret(f.value, resp.ContentType, o)
		if err != nil {
			return fetched{}, fmt.Errorf("%w: %s in vault %q: %w", ErrDecode, o, vault, err)
		}
		f.value = v
	}
	return f, nil
}

// history fetches the newest objectVersionHistory enabled versions, newest first.
func (p *Provider) history(ctx context.Context, vc *vaultClient, vault string, o Object) ([]fetched, error) {
	type ver struct {
		id      string
		created time.Time
	}
	var vers []ver
	list, err := p.versions(ctx, vc, o)
	if err != nil {
		return nil, kvError(err, o, vault)
	}
	for _, s := range list {
		if s.enabled {
			vers = append(vers, ver{id: s.id, created: s.created})
		}
	}
	if len(vers) == 0 {
		return nil, fmt.Errorf("%w: %s in vault %q has no enabled version", ErrObjectNotFound, o, vault)
	}
	sort.SliceStable(vers, func(i, j int) bool { return vers[i].created.After(vers[j].created) })
	if len(vers) > int(o.ObjectVersionHistory) {
		vers = vers[:o.ObjectVersionHistory]
	}
	out := make([]fetched, len(vers))
	for i, v := range vers {
		f, err := p.fetchVersion(ctx, vc, vault, o, v.id)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// decode turns a value into the file's bytes per objectEncoding.
func decode(value string, o Object) ([]byte, error) {
	switch o.ObjectEncoding {
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: objectEncoding is base64 but the value is not base64", ErrDecode, o)
		}
		return b, nil
	case EncodingHex:
		b, err := hex.DecodeString(value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: objectEncoding is hex but the value is not hexadecimal", ErrDecode, o)
		}
		return b, nil
	}
	return []byte(value), nil
}

// kvError says which object failed and what Key Vault answered (status and code, never the
// request's token or any value).
func kvError(err error, o Object, vault string) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		e := &kvStatusError{code: codes.Unavailable, kvCode: re.ErrorCode,
			msg: fmt.Sprintf("get %s from vault %q: Key Vault answered %d %s", o, vault, re.StatusCode, re.ErrorCode)}
		switch re.StatusCode {
		case http.StatusForbidden:
			e.code, e.msg = codes.PermissionDenied, e.msg+": the identity may not read it"
		case http.StatusNotFound:
			e.code, e.wrapped = codes.NotFound, ErrObjectNotFound
		case http.StatusUnauthorized:
			e.code = codes.Unauthenticated
		case http.StatusTooManyRequests:
			e.code, e.msg = codes.ResourceExhausted, e.msg+" after retries"
		}
		return e
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("get %s from vault %q: %w", o, vault, err)
	}
	return &kvStatusError{code: codes.Unavailable, msg: fmt.Sprintf("get %s from vault %q: %v", o, vault, err)}
}

type kvStatusError struct {
	code    codes.Code
	kvCode  string // Key Vault's error code (SecretNotFound), for keyvault_request's error label
	msg     string
	wrapped error
}

func (e *kvStatusError) Error() string { return e.msg }
func (e *kvStatusError) Unwrap() error { return e.wrapped }

func grpcCode(err error) codes.Code {
	var ke *kvStatusError
	switch {
	case errors.As(err, &ke):
		return ke.code
	case errors.Is(err, ErrInvalidParameters), errors.Is(err, ErrInvalidObjects), errors.Is(err, ErrUnsupported):
		return codes.InvalidArgument
	case errors.Is(err, ErrVaultNotFound), errors.Is(err, ErrObjectNotFound):
		return codes.NotFound
	case errors.Is(err, ErrAuthentication):
		return codes.Unauthenticated
	case errors.Is(err, ErrMountTooLarge):
		return codes.ResourceExhausted
	case errors.Is(err, ErrDecode):
		return codes.FailedPrecondition
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}
