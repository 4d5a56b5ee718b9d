package engines

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Redis's firewall. Redis has no address ACL, and a packet filter needs root, so a cache's
// public ports are the cloud's: a front accepts each connection, admits it when the cache has no
// firewall rule (as in Azure) or the client's IPv4 address is in a rule's range, and splices it
// to redis-server, which listens on 127.0.0.1 on ports of its own. TLS stays end to end (the
// front never reads the bytes), so the certificate and both access keys are redis-server's as
// before. A refused client is reset at once. Rules change at run time without a restart; they
// judge new connections, as Azure's do.

// gate holds a cache's firewall rules, shared by its TLS and plain fronts.
type gate struct {
	rules atomic.Pointer[[]IPRange] // nil or empty: every client is admitted
}

func (g *gate) set(rules []IPRange) {
	r := append([]IPRange(nil), rules...)
	g.rules.Store(&r)
}

// admits reports whether a client at addr may connect.
func (g *gate) admits(addr netip.Addr) bool {
	rules := g.rules.Load()
	if rules == nil || len(*rules) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, r := range *rules {
		if addr.Is4() && r.Start.Compare(addr) <= 0 && addr.Compare(r.End) <= 0 {
			return true
		}
	}
	return false
}

// front is one listening port of a cache.
type front struct {
	ln     net.Listener
	target string // redis-server's own address
	gate   *gate
	log    *slog.Logger
	cache  string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// listenFront opens addr for the cache; serve runs it until close.
func listenFront(addr netip.AddrPort, target netip.AddrPort, g *gate, cache string, log *slog.Logger) (*front, error) {
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	f := &front{ln: ln, target: target.String(), gate: g, log: log, cache: cache, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *front) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		if !f.gate.admits(peer.Addr()) {
			// A reset, not a close: the client's handshake fails at once, as at a refusing firewall.
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			f.log.Info("Refused a client outside the cache's firewall rules", "cache", f.cache, "client", peer.Addr().String())
			continue
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

// pipe splices c to redis-server both ways (TCP to TCP: the kernel's splice, no copy in Go).
func (f *front) pipe(c net.Conn) {
	defer f.wg.Done()
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		_ = c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, c)
		closeWrite(up)
		close(done)
	}()
	_, _ = io.Copy(c, up)
	closeWrite(c)
	<-done
	f.untrack(c, up)
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (f *front) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil { // closing
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *front) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(f.conns, c)
	}
}

// close stops listening, ends every connection and waits for them.
func (f *front) close() error {
	err := f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
