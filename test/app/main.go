// Command test-app is the small workload the local node's tests run in a pod. Without arguments
// it reads one Key Vault secret with DefaultAzureCredential, exactly as an application would, and
// prints the secret's name, version and the SHA-256 of its value (never the value itself).
//
// Environment: VAULT_URL and SECRET_NAME; the credential reads the standard AZURE_* variables
// (a client secret, or workload identity's AZURE_FEDERATED_TOKEN_FILE), AZURE_AUTHORITY_HOST and
// SSL_CERT_FILE for a cloud other than Azure's public one. With READ_EVERY (a duration) it reads
// again every so often until SIGTERM, each time with a new credential (so each read exchanges
// the token file as it is then), and prints each outcome, with the token file's expiry (its
// exp claim, never the token) as `token-exp N`; a failed read is printed and the loop goes on.
//
// The image has no shell, so the same binary also serves the node's tests as a tool:
//
//	test-app serve ADDR   HTTP server answering every request with the caller's address
//	test-app get URL      prints the body of an HTTP GET (exit 1 unless 200)
//	test-app cat FILE...  prints files
//	test-app imds-token SCOPE  gets a token from IMDS (169.254.169.254) with the Azure SDK's
//	                      ManagedIdentityCredential and prints its xms_mirid and oid claims
//	                      (never the token)
//	test-app hcp-token SCOPE EVERY  a hosted control plane's component: authenticates with the
//	                      credentials file of MANAGED_AZURE_HCP_CREDENTIALS_FILE_PATH through
//	                      pkg/hcpcredentials (at the file's authentication_endpoint, as written; the
//	                      CA from SSL_CERT_FILE, the proxy from HTTPS_PROXY), gets a token for SCOPE
//	                      every EVERY with that one credential until SIGTERM, and prints each
//	                      outcome with the appid claim and the authority and not_before of the
//	                      credentials file in use (never the token)
//	test-app shop ADDR    the app of config/samples/app: each GET writes and reads a row in
//	                      PostgreSQL (pgx), a key in Redis (go-redis) and a blob (azblob, workload
//	                      identity), see shop.go
//	test-app lookup NAME...  resolves each name with the pod's resolver and prints one line per
//	                      name: its addresses, or "notfound" (NXDOMAIN); any other failure
//	                      (a timeout) is an error
//	test-app dial         connects to PostgreSQL (PG_DSN, PGPASSWORD) with pgx and to Redis
//	                      (REDIS_URL) with go-redis, writes and reads back a value in each and
//	                      prints one line per service (never a secret)
//	test-app sleep        waits for SIGTERM
//	test-app echo WORDS   prints its arguments and waits for SIGTERM (a container with logs)
package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if len(os.Args) > 1 {
		err = tool(ctx, os.Args[1], os.Args[2:], os.Stdout)
	} else if every := os.Getenv("READ_EVERY"); every != "" {
		err = loop(ctx, every, os.Getenv, os.Stdout)
	} else {
		err = run(ctx, os.Getenv, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-app:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, out io.Writer) error {
	vault, name := getenv("VAULT_URL"), getenv("SECRET_NAME")
	if vault == "" || name == "" {
		return errors.New("VAULT_URL and SECRET_NAME are required")
	}
	cfg := azure.ConfigFromEnv(getenv)
	opts, err := cfg.ClientOptions()
	if err != nil {
		return fmt.Errorf("configure client: %w", err)
	}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions:            opts,
		TenantID:                 cfg.TenantID,
		DisableInstanceDiscovery: !cfg.IsPublic(),
	})
	if err != nil {
		return fmt.Errorf("build credential: %w", err)
	}
	secretsOpts, err := cfg.SecretsOptions()
	if err != nil {
		return fmt.Errorf("configure client: %w", err)
	}
	client, err := azsecrets.NewClient(vault, cred, secretsOpts)
	if err != nil {
		return fmt.Errorf("build secrets client: %w", err)
	}
	resp, err := client.GetSecret(ctx, name, "", nil)
	if err != nil {
		return fmt.Errorf("read secret %s: %w", name, err)
	}
	if resp.Value == nil || resp.ID == nil {
		return fmt.Errorf("read secret %s: the response has no value", name)
	}
	sum := sha256.Sum256([]byte(*resp.Value))
	fmt.Fprintf(out, "read secret %s version %s sha256 %s\n", name, path.Base(string(*resp.ID)), hex.EncodeToString(sum[:]))
	return nil
}

// loop reads the secret every period until ctx ends.
func loop(ctx context.Context, period string, getenv func(string) string, out io.Writer) error {
	every, err := time.ParseDuration(period)
	if err != nil || every <= 0 {
		return fmt.Errorf("READ_EVERY %q is not a positive duration", period)
	}
	for {
		exp := ""
		if f := getenv("AZURE_FEDERATED_TOKEN_FILE"); f != "" {
			exp = " token-exp " + tokenExp(f)
		}
		var line strings.Builder
		if err := run(ctx, getenv, &line); err != nil {
			fmt.Fprintf(out, "read failed%s: %v\n", exp, err)
		} else {
			fmt.Fprintf(out, "%s%s\n", strings.TrimSuffix(line.String(), "\n"), exp)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// tokenExp is the exp claim of the JWT in file, or "unknown".
func tokenExp(file string) string {
	b, err := os.ReadFile(file) //nolint:gosec // the path the pod's environment names
	if err != nil {
		return "unknown"
	}
	parts := strings.Split(strings.TrimSpace(string(b)), ".")
	if len(parts) != 3 {
		return "unknown"
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "unknown"
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return "unknown"
	}
	return strconv.FormatInt(claims.Exp, 10)
}

func tool(ctx context.Context, name string, args []string, out io.Writer) error {
	switch name {
	case "serve":
		if len(args) != 1 {
			return errors.New("usage: test-app serve ADDR")
		}
		srv := &http.Server{Addr: args[0], ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "remote %s\n", r.RemoteAddr) //nolint:gosec // plain text, for tests

		})}
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case "get":
		if len(args) != 1 {
			return errors.New("usage: test-app get URL")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil) //nolint:gosec // a test tool: it fetches what the test names
		if err != nil {
			return err
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req) //nolint:gosec // a test tool: it fetches what the test names
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(out, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", args[0], resp.Status)
		}
		return nil
	case "shop":
		if len(args) != 1 {
			return errors.New("usage: test-app shop ADDR")
		}
		return shop(ctx, args[0], os.Getenv)
	case "imds-token":
		if len(args) != 1 {
			return errors.New("usage: test-app imds-token SCOPE")
		}
		return imdsToken(ctx, args[0], out)
	case "hcp-token":
		if len(args) != 2 {
			return errors.New("usage: test-app hcp-token SCOPE EVERY")
		}
		return hcpToken(ctx, args[0], args[1], os.Getenv, out)
	case "cat":
		for _, f := range args {
			b, err := os.ReadFile(f) //nolint:gosec // a test tool: it prints what the test names
			if err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
		}
		return nil
	case "echo":
		fmt.Fprintln(out, strings.Join(args, " "))
		<-ctx.Done()
		return nil
	case "lookup":
		return lookup(ctx, args, out)
	case "dial":
		return dial(ctx, os.Getenv, out)
	case "sleep":
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("unknown command %q", name)
}

// lookup resolves each name as the pod's programs do (resolv.conf, its search list) and prints
// "NAME ADDR..." or "NAME notfound".
func lookup(ctx context.Context, names []string, out io.Writer) error {
	if len(names) == 0 {
		return errors.New("usage: test-app lookup NAME [NAME ...]")
	}
	for _, name := range names {
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		var dnsErr *net.DNSError
		switch {
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			fmt.Fprintln(out, name, "notfound")
		case err != nil:
			return fmt.Errorf("look up %s: %w", name, err)
		default:
			fmt.Fprintln(out, name, strings.Join(addrs, " "))
		}
	}
	return nil
}

// imdsToken gets a token for scope through IMDS, as an app of aad-pod-identity does, and prints
// the claims that name the identity.
func imdsToken(ctx context.Context, scope string, out io.Writer) error {
	cred, err := azidentity.NewManagedIdentityCredential(nil)
	if err != nil {
		return fmt.Errorf("build credential: %w", err)
	}
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
	if err != nil {
		return fmt.Errorf("get token: %w", err)
	}
	parts := strings.Split(tok.Token, ".")
	if len(parts) != 3 {
		return errors.New("get token: the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return fmt.Errorf("decode token: %w", err)
	}
	var claims struct {
		MIRID string `json:"xms_mirid"`
		OID   string `json:"oid"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return fmt.Errorf("decode token: %w", err)
	}
	fmt.Fprintf(out, "imds token xms_mirid %s oid %s\n", claims.MIRID, claims.OID)
	return nil
}

// hcpToken is a control-plane component's loop: one credential, following its mounted file,
// asked for a token every period.
func hcpToken(ctx context.Context, scope, period string, getenv func(string) string, out io.Writer) error {
	every, err := time.ParseDuration(period)
	if err != nil || every <= 0 {
		return fmt.Errorf("hcp-token: %q is not a positive duration", period)
	}
	opts, err := azure.Config{CAFile: getenv("SSL_CERT_FILE")}.ClientOptions()
	if err != nil {
		return fmt.Errorf("configure client: %w", err)
	}
	cred, err := hcpcredentials.New(ctx, hcpcredentials.Options{ClientOptions: opts})
	if err != nil {
		return fmt.Errorf("load credentials: %w", err)
	}
	for {
		tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{scope}})
		cur := cred.Current()
		notBefore := cur.NotBefore.UTC().Format(time.RFC3339Nano)
		if err != nil {
			fmt.Fprintf(out, "hcp-token failed authority %s not_before %s: %v\n", cur.AuthorityHost, notBefore, err)
		} else {
			fmt.Fprintf(out, "hcp-token ok appid %s authority %s not_before %s\n", claim(tok.Token, "appid"), cur.AuthorityHost, notBefore)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// claim is a string claim of a JWT, or "unknown".
func claim(token, name string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "unknown"
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "unknown"
	}
	var claims map[string]any
	if json.Unmarshal(payload, &claims) != nil {
		return "unknown"
	}
	if v, ok := claims[name].(string); ok && v != "" {
		return v
	}
	return "unknown"
}
