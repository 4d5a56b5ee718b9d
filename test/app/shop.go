package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/cerulean/cerulean/internal/azure"
)

// shop serves the sample app of config/samples/app: each GET writes and reads back a row in
// PostgreSQL (PG_DSN, the password in PGPASSWORD), a key in Redis (REDIS_URL) and a blob
// (BLOB_ENDPOINT, BLOB_CONTAINER, with DefaultAzureCredential: workload identity in the pod)
// and answers one line per service; any failure is a 500 naming the service (never a secret).
func shop(ctx context.Context, addr string, getenv func(string) string) error {
	for _, k := range []string{"PG_DSN", "REDIS_URL", "BLOB_ENDPOINT", "BLOB_CONTAINER"} {
		if getenv(k) == "" {
			return fmt.Errorf("%s is required", k)
		}
	}
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		var b strings.Builder
		for _, step := range []struct {
			name string
			run  func(context.Context, func(string) string) (string, error)
		}{{"postgres", shopPostgres}, {"redis", shopRedis}, {"blob", shopBlob}} {
			got, err := step.run(rctx, getenv)
			if err != nil {
				http.Error(w, b.String()+step.name+" failed: "+err.Error(), http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(&b, "%s ok %s\n", step.name, got)
		}
		_, _ = io.WriteString(w, b.String())
	})}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func shopPostgres(ctx context.Context, getenv func(string) string) (string, error) {
	conn, err := pgx.Connect(ctx, getenv("PG_DSN")) // libpq's PGPASSWORD supplies the password
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS visits (id serial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return "", fmt.Errorf("create table: %w", err)
	}
	var id, n int
	if err := conn.QueryRow(ctx, "INSERT INTO visits DEFAULT VALUES RETURNING id").Scan(&id); err != nil {
		return "", fmt.Errorf("insert: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM visits").Scan(&n); err != nil {
		return "", fmt.Errorf("select: %w", err)
	}
	return fmt.Sprintf("row %d of %d", id, n), nil
}

func shopRedis(ctx context.Context, getenv func(string) string) (string, error) {
	opts, err := redis.ParseURL(getenv("REDIS_URL"))
	if err != nil {
		return "", errors.New("REDIS_URL is not a redis URL") // its text holds the key
	}
	c := redis.NewClient(opts)
	defer c.Close()
	n, err := c.Incr(ctx, "visits").Result()
	if err != nil {
		return "", fmt.Errorf("incr: %w", err)
	}
	got, err := c.Get(ctx, "visits").Int64()
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	return fmt.Sprintf("visits %d (read %d)", n, got), nil
}

func shopBlob(ctx context.Context, getenv func(string) string) (string, error) {
	cfg := azure.ConfigFromEnv(getenv)
	opts, err := cfg.ClientOptions()
	if err != nil {
		return "", fmt.Errorf("configure client: %w", err)
	}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: opts, TenantID: cfg.TenantID, DisableInstanceDiscovery: !cfg.IsPublic(),
	})
	if err != nil {
		return "", fmt.Errorf("build credential: %w", err)
	}
	c, err := azblob.NewClient(getenv("BLOB_ENDPOINT"), cred, &azblob.ClientOptions{ClientOptions: opts})
	if err != nil {
		return "", fmt.Errorf("build blob client: %w", err)
	}
	name := fmt.Sprintf("visit-%d", time.Now().UnixNano())
	body := "hello from " + hostname()
	if _, err := c.UploadBuffer(ctx, getenv("BLOB_CONTAINER"), name, []byte(body), nil); err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	resp, err := c.DownloadStream(ctx, getenv("BLOB_CONTAINER"), name, nil)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("download: read: %w", err)
	}
	if string(got) != body {
		return "", fmt.Errorf("download: read back %q, wrote %q", got, body)
	}
	return name, nil
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
