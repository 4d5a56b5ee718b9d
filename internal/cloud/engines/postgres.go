package engines

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cerulean/cerulean/internal/fsutil"
)

// PostgresBin is where Debian's postgresql-15 installs its server programs.
var PostgresBin = "/usr/lib/postgresql/15/bin"

// PostgresMajor is the major version every server runs, whatever version ARM was asked for.
const PostgresMajor = "15"

// PostgresServer is what a flexible server's engine needs from its ARM resource.
type PostgresServer struct {
	Name     string // the server's name: it answers as NAME.postgres.database.azure.com
	Login    string // the administrator login (the cluster's bootstrap superuser)
	Password string // its password, used only when the cluster is created
	Firewall []IPRange
}

// IPRange is a firewall rule's inclusive range of IPv4 addresses.
type IPRange struct {
	Start, End netip.Addr
}

// PostgresHost is a server's public name.
func PostgresHost(name string) string { return name + ".postgres.database.azure.com" }

func pgKey(name string) string { return "postgres/" + strings.ToLower(name) }

// StartPostgres starts the server's postmaster (creating its cluster with initdb on first use)
// and waits until it accepts connections; it is a no-op for a running server except that the
// firewall is applied again. It returns where the server listens.
func (s *Supervisor) StartPostgres(ctx context.Context, srv PostgresServer) (netip.AddrPort, error) {
	if p, ok := s.get(pgKey(srv.Name)); ok {
		return p.addr, s.SetPostgresFirewall(ctx, srv.Name, srv.Firewall)
	}
	acct, err := engineUser("postgres")
	if err != nil {
		return netip.AddrPort{}, err
	}
	dir := s.dir("postgres", srv.Name)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return netip.AddrPort{}, err
	}
	own, err := s.engineAddr(dir)
	if err != nil {
		return netip.AddrPort{}, err
	}
	addr, err := listenAt(own, 5432, filepath.Join(dir, "port"))
	if err != nil {
		return netip.AddrPort{}, err
	}
	n := int(addr.Port())
	certFile, keyFile, err := s.writeServing(dir, PostgresHost(srv.Name), addr.Addr())
	if err != nil {
		return netip.AddrPort{}, err
	}
	if err := writeHBA(filepath.Join(dir, "pg_hba.conf"), srv.Firewall); err != nil {
		return netip.AddrPort{}, err
	}
	// The socket directory is private and its path short (a Unix socket path has ~107 bytes):
	// in the engine's directory when that fits, else in the temp dir, named for the engine's
	// directory so that a start after a kill -9 replaces the one left behind.
	sock := filepath.Join(dir, "run")
	if len(sock)+len("/.s.PGSQL.65535") > 100 {
		sum := sha256.Sum256([]byte(dir))
		sock = filepath.Join(os.TempDir(), "cerulean-pg-"+hex.EncodeToString(sum[:6]))
	}
	_ = os.RemoveAll(sock)
	if err := os.Mkdir(sock, 0o700); err != nil {
		return netip.AddrPort{}, err
	}
	if err := acct.own(dir); err != nil {
		return netip.AddrPort{}, err
	}
	if err := acct.own(sock); err != nil {
		return netip.AddrPort{}, err
	}
	// A new cluster is flushed to disk while its postmaster starts; the server is reported
	// started only once both are done.
	var synced chan error // nil: nothing to wait for
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); os.IsNotExist(err) {
		if err := s.initdb(ctx, acct, dir, data, srv); err != nil {
			_ = os.RemoveAll(sock)
			return netip.AddrPort{}, err
		}
		synced = make(chan error, 1)
		go func() { synced <- fsutil.SyncFS(data) }()
	}
	args := []string{"-D", data,
		"-c", "listen_addresses=" + addr.Addr().String(), "-c", "port=" + strconv.Itoa(n),
		"-c", "unix_socket_directories=" + sock, "-c", "hba_file=" + filepath.Join(dir, "pg_hba.conf"),
		"-c", "ssl=on", "-c", "ssl_cert_file=" + certFile, "-c", "ssl_key_file=" + keyFile,
		"-c", "ssl_min_protocol_version=TLSv1.2", "-c", "password_encryption=scram-sha-256",
		// Small and durable: an idle server stays within a few tens of MiB; every commit is
		// flushed (the defaults, stated so nobody "tunes" them away).
		"-c", "shared_buffers=16MB", "-c", "max_connections=50", "-c", "fsync=on", "-c", "synchronous_commit=on",
		// No statement in the log: a failed ALTER ROLE would print its password.
		"-c", "logging_collector=off", "-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic"}
	ready := func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, adminDSN(sock, n, srv.Login))
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}
	p, err := startPostmaster(ctx, func() *exec.Cmd { return command(acct, filepath.Join(PostgresBin, "postgres"), args...) }, ready)
	if err == nil && synced != nil {
		err = <-synced
	}
	if err != nil {
		if p != nil {
			_ = stopPostgres(p)
		}
		_ = os.RemoveAll(sock)
		return netip.AddrPort{}, fmt.Errorf("start PostgreSQL for %s: %w", srv.Name, err)
	}
	p.addr, p.sock, p.stop = addr, sock, stopPostgres
	if err := s.put(pgKey(srv.Name), p); err != nil {
		_ = p.stop(p)
		return netip.AddrPort{}, err
	}
	s.log.InfoContext(ctx, "Started PostgreSQL", "server", srv.Name, "addr", addr.String())
	return addr, nil
}

// stopPostgres is PostgreSQL's fast shutdown (SIGINT: sessions end, the WAL is flushed).
func stopPostgres(p *proc) error {
	err := terminate(p, syscall.SIGINT, 30*time.Second)
	if p.sock != "" {
		_ = os.RemoveAll(p.sock)
	}
	return err
}

// startPostmaster starts the postmaster and waits until ready succeeds. A postmaster.pid left
// by one a kill -9 ended (its backends may still be exiting) makes the first attempts exit, so
// it tries a few times. On an error, p is the postmaster still running, if one is.
func startPostmaster(ctx context.Context, mk func() *exec.Cmd, ready func(context.Context) error) (p *proc, err error) {
	for attempt := 0; ; attempt++ {
		if p, err = launch(mk()); err != nil {
			return nil, err
		}
		if err = waitReady(ctx, p, "PostgreSQL", ready); err == nil {
			return p, nil
		}
		select {
		case <-p.done:
		default:
			return p, err // running but not ready
		}
		if attempt == 9 || (!strings.Contains(err.Error(), "lock file") && !strings.Contains(err.Error(), "shared memory block")) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// initdb creates the cluster with the administrator as its bootstrap superuser.
func (s *Supervisor) initdb(ctx context.Context, acct *account, dir, data string, srv PostgresServer) error {
	pw := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pw, []byte(srv.Password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pw)
	if err := acct.own(pw); err != nil {
		return err
	}
	cmd := command(acct, filepath.Join(PostgresBin, "initdb"), "-D", data, "-U", srv.Login, "--pwfile="+pw,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions",
		"--no-sync") // StartPostgres flushes the whole cluster at once (fsutil.SyncFS)
	t := &tail{}
	cmd.Stdout, cmd.Stderr = t, t
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(data)
		return fmt.Errorf("initdb for %s: %w: %s", srv.Name, err, t.String())
	}
	return ctx.Err()
}

// StopPostgres stops the server's postmaster (a fast shutdown), if it runs.
func (s *Supervisor) StopPostgres(name string) error { return s.stopKey(pgKey(name)) }

// RemovePostgres stops the server and deletes its data.
func (s *Supervisor) RemovePostgres(name string) error {
	err := s.StopPostgres(name)
	if rerr := os.RemoveAll(s.dir("postgres", name)); rerr != nil {
		err = rerr
	}
	return err
}

// PostgresAddr is where a running server listens.
func (s *Supervisor) PostgresAddr(name string) (netip.AddrPort, bool) {
	p, ok := s.get(pgKey(name))
	if !ok {
		return netip.AddrPort{}, false
	}
	return p.addr, true
}

func adminDSN(sock string, port int, login string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable connect_timeout=5", sock, port, quoteDSN(login))
}

func quoteDSN(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// postgresConn connects as the administrator over the server's private Unix socket.
func (s *Supervisor) postgresConn(ctx context.Context, name, login string) (*pgx.Conn, error) {
	p, ok := s.get(pgKey(name))
	if !ok {
		return nil, fmt.Errorf("PostgreSQL server %s: %w", name, ErrNotRunning)
	}
	c, err := pgx.Connect(ctx, adminDSN(p.sock, int(p.addr.Port()), login))
	if err != nil {
		return nil, fmt.Errorf("connect to %s as administrator: %w", name, err)
	}
	return c, nil
}

// postgresAdmin runs statements as the administrator.
func (s *Supervisor) postgresAdmin(ctx context.Context, name, login string, stmts ...string) error {
	c, err := s.postgresConn(ctx, name, login)
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// SetPostgresPassword changes the administrator's password.
func (s *Supervisor) SetPostgresPassword(ctx context.Context, name, login, password string) error {
	q := "ALTER ROLE " + pgx.Identifier{login}.Sanitize() + " WITH PASSWORD " + literal(password)
	if err := s.postgresAdmin(ctx, name, login, q); err != nil {
		return fmt.Errorf("change the administrator password of %s: %w", name, err)
	}
	return nil
}

// CreateDatabase creates a database unless it exists.
func (s *Supervisor) CreateDatabase(ctx context.Context, server, login, db, charset, collation string) error {
	q := "CREATE DATABASE " + pgx.Identifier{db}.Sanitize()
	if charset != "" {
		q += " ENCODING " + literal(charset)
	}
	if collation != "" {
		q += " LC_COLLATE " + literal(collation) + " LC_CTYPE " + literal(collation) + " TEMPLATE template0"
	}
	err := s.postgresAdmin(ctx, server, login, q)
	if err != nil && strings.Contains(err.Error(), "SQLSTATE 42P04") { // duplicate_database
		return nil
	}
	return err
}

// DropDatabase drops a database, ending its sessions.
func (s *Supervisor) DropDatabase(ctx context.Context, server, login, db string) error {
	return s.postgresAdmin(ctx, server, login, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
}

// SetParameter sets a server parameter (ALTER SYSTEM) and reloads the configuration.
func (s *Supervisor) SetParameter(ctx context.Context, server, login, name, value string) error {
	return s.postgresAdmin(ctx, server, login,
		"ALTER SYSTEM SET "+pgx.Identifier{name}.Sanitize()+" = "+literal(value), "SELECT pg_reload_conf()")
}

// SourceUser is a Parameter's Source when it was set with ALTER SYSTEM (postgresql.auto.conf).
const SourceUser = "user"

// Parameter is one row of pg_settings; Source is SourceUser or PostgreSQL's own source.
type Parameter struct {
	Name, Value, Description, DataType, Default, Unit, Source string
	Restart                                                   bool
}

// Parameters reads pg_settings (one parameter when name is set).
func (s *Supervisor) Parameters(ctx context.Context, server, login, name string) ([]Parameter, error) {
	c, err := s.postgresConn(ctx, server, login)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, `SELECT name, coalesce(setting,''), coalesce(short_desc,''), vartype, coalesce(boot_val,''),
		coalesce(unit,''), CASE WHEN sourcefile LIKE '%postgresql.auto.conf' THEN 'user' ELSE source END, context = 'postmaster' FROM pg_settings WHERE $1 = '' OR name = $1 ORDER BY name`, name)
	if err != nil {
		return nil, err
	}
	var out []Parameter
	for rows.Next() {
		var x Parameter
		if err := rows.Scan(&x.Name, &x.Value, &x.Description, &x.DataType, &x.Default, &x.Unit, &x.Source, &x.Restart); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Databases lists the server's databases as its administrator sees them (templates left out),
// whoever made them: through ARM or with SQL.
func (s *Supervisor) Databases(ctx context.Context, server, login string) ([]string, error) {
	c, err := s.postgresConn(ctx, server, login)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	rows, err := c.Query(ctx, `SELECT datname FROM pg_database WHERE NOT datistemplate ORDER BY datname`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// SetPostgresFirewall rewrites the server's pg_hba.conf for these rules and reloads it.
func (s *Supervisor) SetPostgresFirewall(ctx context.Context, name string, rules []IPRange) error {
	if err := writeHBA(filepath.Join(s.dir("postgres", name), "pg_hba.conf"), rules); err != nil {
		return err
	}
	p, ok := s.get(pgKey(name))
	if !ok {
		return nil // read at the next start
	}
	// SIGHUP makes the postmaster reread pg_hba.conf; new connections see it at once.
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload %s: %w", name, err)
	}
	return ctx.Err()
}

// writeHBA allows the administrator's Unix socket (private to the cloud and the engine user)
// and, over TLS only, with a password, the firewall rules' addresses. Anything else gets
// PostgreSQL's own refusal, as Azure's servers answer a client outside every rule:
// `no pg_hba.conf entry for host "…", user "…", database "…", SSL encryption`.
func writeHBA(path string, rules []IPRange) error {
	var b strings.Builder
	b.WriteString("# Written by the Cerulean local cloud from the server's firewall rules.\n")
	b.WriteString("local all all trust\n")
	for _, r := range rules {
		for _, p := range rangeToPrefixes(r.Start, r.End) {
			fmt.Fprintf(&b, "hostssl all all %s scram-sha-256\n", p)
		}
	}
	// A temporary file of its own: a rule's write and a start's may run at once.
	return fsutil.WriteFileAtomic(path, []byte(b.String()), 0o644) //nolint:gosec // pg_hba.conf holds no secret and the engine user reads it
}

// rangeToPrefixes covers an inclusive IPv4 range with the fewest CIDR prefixes.
func rangeToPrefixes(start, end netip.Addr) []netip.Prefix {
	if !start.Is4() || !end.Is4() || end.Less(start) {
		return nil
	}
	lo, hi := toInt(start), toInt(end)
	var out []netip.Prefix
	for lo.Cmp(hi) <= 0 {
		bits := 32
		for bits > 0 {
			size := new(big.Int).Lsh(big.NewInt(1), uint(32-bits+1))
			mask := new(big.Int).Sub(size, big.NewInt(1))
			if new(big.Int).And(lo, mask).Sign() != 0 {
				break
			}
			last := new(big.Int).Add(lo, mask)
			if last.Cmp(hi) > 0 {
				break
			}
			bits--
		}
		var a [4]byte
		lo.FillBytes(a[:])
		out = append(out, netip.PrefixFrom(netip.AddrFrom4(a), bits))
		lo = new(big.Int).Add(lo, new(big.Int).Lsh(big.NewInt(1), uint(32-bits)))
	}
	return out
}

func toInt(a netip.Addr) *big.Int {
	b := a.As4()
	return new(big.Int).SetBytes(b[:])
}

// literal is a SQL string literal (standard_conforming_strings is on).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
