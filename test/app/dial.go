package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// dial connects to the data planes its environment names, as an app does with the connection
// details it is given, and prints one line per service: PG_DSN with pgx (the password in
// libpq's PGPASSWORD), REDIS_URL with go-redis. TLS is verified against the system's roots,
// so SSL_CERT_FILE names the only CA. Each writes a value and reads it back. Nothing secret is
// printed: a failure names the step, and pgx's errors carry no password.
func dial(ctx context.Context, getenv func(string) string, out io.Writer) error {
	if getenv("PG_DSN") == "" && getenv("REDIS_URL") == "" {
		return errors.New("usage: test-app dial, with PG_DSN (and PGPASSWORD) or REDIS_URL")
	}
	if dsn := getenv("PG_DSN"); dsn != "" {
		got, err := dialPostgres(ctx, dsn)
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		fmt.Fprintln(out, "postgres ok", got)
	}
	if u := getenv("REDIS_URL"); u != "" {
		opts, err := redis.ParseURL(u)
		if err != nil {
			return errors.New("redis: REDIS_URL is not a redis URL") // its text holds the key
		}
		got, err := dialRedis(ctx, opts)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		fmt.Fprintln(out, "redis ok", got)
	}
	return nil
}

func dialPostgres(ctx context.Context, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS dial (v text NOT NULL)"); err != nil {
		return "", fmt.Errorf("create table: %w", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO dial VALUES ('from-the-pod')"); err != nil {
		return "", fmt.Errorf("insert: %w", err)
	}
	var n int
	var ssl bool
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM dial), (SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid())").Scan(&n, &ssl); err != nil {
		return "", fmt.Errorf("select: %w", err)
	}
	return fmt.Sprintf("rows %d ssl %t", n, ssl), nil
}

func dialRedis(ctx context.Context, opts *redis.Options) (string, error) {
	c := redis.NewClient(opts)
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx, "dial", "from-the-pod", 0).Err(); err != nil {
		return "", fmt.Errorf("set: %w", err)
	}
	v, err := c.Get(ctx, "dial").Result()
	if err != nil {
		return "", fmt.Errorf("get: %w", err)
	}
	return fmt.Sprintf("get %s tls %t", v, opts.TLSConfig != nil), nil
}
