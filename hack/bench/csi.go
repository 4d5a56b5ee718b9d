package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/benchutil"
	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/csiprovider"
)

func init() {
	register(section{title: "Secrets Store CSI provider: rotation cost", run: benchCSI})
}

const (
	csiPods      = 1000
	csiIntervals = 3
	csiInterval  = 2 * time.Minute // the driver's --rotation-poll-interval; simulated by a clock
)

// settableClock is the provider's clock: the benchmark moves it by one rotation interval
// between rounds instead of waiting.
type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settableClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// benchCSI mounts one SecretProviderClass with 2 secrets for 1,000 pods at each of three
// rotation intervals, as the driver's rotation does (64 at a time, over the provider's unix
// socket), with the cache on (TTL = the interval) and off (what the upstream provider does:
// a token exchange and a GET per pod and object). A new version of both secrets is set before
// every interval, so each round must serve fresh values.
func benchCSI(ctx context.Context, env benchEnv) ([]row, error) {
	limits := cloudarm.Unlimited
	c, err := startCloud(ctx, env, "csi", cloud.Options{ARM: cloudarm.Config{RetryAfter: 50 * time.Millisecond, Limits: &limits}, RequestLogSize: 100000})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	f, err := newCSIFixture(ctx, c)
	if err != nil {
		return nil, err
	}
	on, err := f.measureMode(ctx, env, csiInterval)
	if err != nil {
		return nil, fmt.Errorf("cache on: %w", err)
	}
	off, err := f.measureMode(ctx, env, 0)
	if err != nil {
		return nil, fmt.Errorf("cache off: %w", err)
	}
	return csiRows(on, off), nil
}

// csiFixture is what every mode of benchCSI mounts: the bench vault's two secrets, read by
// reader with its client secret, written (rotated) by the owner's secrets client sc.
type csiFixture struct {
	c           *cloud.Cloud
	reader      entra.Principal
	sc          *azsecrets.Client
	secretsJSON string // the mount's Secrets: the reader's credentials
	perm        string // the mount's Permission
}

// csiObjects is the SecretProviderClass's objects parameter: the two secrets.
const csiObjects = "array:\n  - |\n    objectName: db-password\n  - |\n    objectName: api-key\n"

// csiOutcome is one mode's measurement: the reader's Key Vault GETs, token requests, and the
// mount latency.
type csiOutcome struct {
	gets, tokens int
	lat          benchutil.Result
}

// newCSIFixture sets up the readable vault and writes a first version of both secrets with the
// owner's token, before anything is counted.
func newCSIFixture(ctx context.Context, c *cloud.Cloud) (*csiFixture, error) {
	reader, secret, sc, err := readableVault(ctx, c, "csi-reader")
	if err != nil {
		return nil, err
	}
	f := &csiFixture{c: c, reader: reader, sc: sc}
	if err := f.rotate(ctx, -1); err != nil { // the writer's own token, before anything is counted
		return nil, err
	}
	secretsJSON, _ := json.Marshal(map[string]string{"clientid": reader.ClientID, "clientsecret": secret})
	perm, _ := json.Marshal(os.FileMode(0o644))
	f.secretsJSON, f.perm = string(secretsJSON), string(perm)
	return f, nil
}

// rotate sets a new version of both secrets, numbered round.
func (f *csiFixture) rotate(ctx context.Context, round int) error {
	for _, n := range []string{"db-password", "api-key"} {
		if _, err := f.sc.SetSecret(ctx, n, azsecrets.SetSecretParameters{Value: to.Ptr(fmt.Sprintf("%s value %d", n, round))}, nil); err != nil {
			return err
		}
	}
	return nil
}

// measureMode runs a provider with cache TTL ttl (0: off) on a unix socket and, for each of the
// csiIntervals rounds, rotates the secrets, mounts them for csiPods pods and moves the
// provider's clock by one interval; it counts the reader's requests to the cloud over all rounds.
func (f *csiFixture) measureMode(ctx context.Context, env benchEnv, ttl time.Duration) (csiOutcome, error) {
	s := f.c.Settings()
	clock := &settableClock{t: time.Now()}
	p, err := csiprovider.New(csiprovider.Options{Azure: azure.Config{AuthorityHost: s.AuthorityHost, CAFile: s.CAFile},
		CloudName: cloud.CloudName, VaultLookupURL: s.URL + cloud.VaultLookupPath, CacheTTL: ttl, Clock: clock.Now})
	if err != nil {
		return csiOutcome{}, err
	}
	sock := filepath.Join(env.scratch, fmt.Sprintf("csi-%d.sock", ttl))
	srv, err := csiprovider.Listen(p, sock)
	if err != nil {
		return csiOutcome{}, err
	}
	defer srv.Close()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}))
	if err != nil {
		return csiOutcome{}, err
	}
	defer conn.Close()
	client := v1alpha1.NewCSIDriverProviderClient(conn)
	since := f.c.RequestLog().Last()
	var all []benchutil.Result
	for round := range csiIntervals {
		if err := f.rotate(ctx, round); err != nil {
			return csiOutcome{}, err
		}
		res := f.mountAll(ctx, client)
		if res.Errors > 0 || res.Requests != csiPods {
			return csiOutcome{}, fmt.Errorf("round %d: %d of %d mounts, %d errors", round, res.Requests, csiPods, res.Errors)
		}
		all = append(all, res)
		clock.Advance(csiInterval)
	}
	return csiOutcome{
		gets:   len(f.c.Requests(reqlog.Filter{Service: "keyvault", Method: http.MethodGet, Status: http.StatusOK, Principal: f.reader.ObjectID, Since: since})),
		tokens: len(f.c.Requests(reqlog.Filter{Service: "entra", Method: http.MethodPost, Since: since})),
		lat:    mergeRounds(all),
	}, nil
}

// mountAll mounts the two secrets for csiPods pods, 64 at a time, through client.
func (f *csiFixture) mountAll(ctx context.Context, client v1alpha1.CSIDriverProviderClient) benchutil.Result {
	s := f.c.Settings()
	var pod atomic.Int64
	return benchutil.Load(ctx, 64, csiPods, 10*time.Minute, func(ctx context.Context) error {
		attrib, _ := json.Marshal(map[string]string{"keyvaultName": "kv-bench", "tenantId": s.TenantID, "objects": csiObjects,
			csiprovider.AttrPodName: fmt.Sprintf("app-%d", pod.Add(1)), csiprovider.AttrPodNamespace: "default"})
		resp, err := client.Mount(ctx, &v1alpha1.MountRequest{Attributes: string(attrib), Secrets: f.secretsJSON,
			TargetPath: "/unused", Permission: f.perm})
		if err == nil && len(resp.Files) != 2 {
			err = fmt.Errorf("mount returned %d files", len(resp.Files))
		}
		return err
	})
}

// mergeRounds is the latency over the three rounds: the median of the rounds' p50s and the
// worst p99.
func mergeRounds(all []benchutil.Result) benchutil.Result {
	lat := all[0]
	for _, r := range all[1:] {
		lat.P99 = max(lat.P99, r.P99)
		lat.Requests += r.Requests
		lat.Elapsed += r.Elapsed
	}
	p50s := []time.Duration{all[0].P50, all[1].P50, all[2].P50}
	lat.P50 = median(p50s)
	return lat
}

// csiRows is benchCSI's table, cache off as the baseline.
func csiRows(on, off csiOutcome) []row {
	label := fmt.Sprintf("%d pods x 2 secrets x %d intervals", csiPods, csiIntervals)
	return []row{
		{benchmark: "Key Vault GETs, cache off (upstream's behaviour), " + label, result: fmt.Sprintf("%d GETs, %d token requests", off.gets, off.tokens), vsBaseline: "baseline"},
		{benchmark: "Key Vault GETs, cache on (TTL = interval), " + label, result: fmt.Sprintf("%d GETs, %d token requests", on.gets, on.tokens),
			vsBaseline: fmt.Sprintf("1/%.0f of the GETs", float64(off.gets)/float64(max(on.gets, 1)))},
		{benchmark: "mount latency, cache off, 64 concurrent", result: off.lat.String(), vsBaseline: "baseline"},
		{benchmark: "mount latency, cache on, 64 concurrent", result: on.lat.String(), vsBaseline: ratio(float64(on.lat.P50), float64(off.lat.P50)) + " of p50"},
	}
}

// readableVault sets up what both CSI sections read: the bench vault (benchVault), the owner as
// its Secrets Officer, and a service principal named readerName as its Secrets User. It returns
// the reader, its client secret, and a secrets client of the owner's to write the vault.
func readableVault(ctx context.Context, c *cloud.Cloud, readerName string) (entra.Principal, string, *azsecrets.Client, error) {
	s := c.Settings()
	opts := c.ClientOptions()
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	cred, err := ownerCred(c, opts)
	if err != nil {
		return entra.Principal{}, "", nil, err
	}
	uri, vaultID, err := benchVault(ctx, s, cred, opts)
	if err != nil {
		return entra.Principal{}, "", nil, err
	}
	dir := c.Entra().Directory
	reader, err := dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: readerName})
	if err != nil {
		return entra.Principal{}, "", nil, err
	}
	secret, _, err := dir.AddSecret(ctx, s.TenantID, reader.ClientID, time.Now().Add(24*time.Hour))
	if err != nil {
		return entra.Principal{}, "", nil, err
	}
	now := time.Now().UTC()
	for _, g := range []struct{ principal, role string }{{s.ObjectID, authz.KeyVaultSecretsOfficer}, {reader.ObjectID, authz.KeyVaultSecretsUser}} {
		name := uuid.NewString()
		if err := c.ARM().Authz().Ensure(ctx, authz.Assignment{ID: authz.AssignmentID(vaultID, name), Name: name, Scope: vaultID,
			RoleDefinitionID: g.role, PrincipalID: g.principal, PrincipalType: "ServicePrincipal", CreatedOn: now, UpdatedOn: now}); err != nil {
			return entra.Principal{}, "", nil, err
		}
	}
	sc, err := azsecrets.NewClient(uri, cred, &azsecrets.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: true})
	if err != nil {
		return entra.Principal{}, "", nil, err
	}
	return reader, secret, sc, nil
}
