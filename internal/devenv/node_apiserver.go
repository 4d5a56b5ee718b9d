package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Pods reach kube-apiserver as in any cluster, through the kubernetes Service's ClusterIP
// (KUBERNETES_SERVICE_HOST, what in-cluster clients dial), which kube-proxy sends to the
// endpoint kube-apiserver advertises: the node's address, at kube-apiserver's port. kube-apiserver
// itself listens on loopback only (the control plane runs without a node too, and nothing
// outside this machine may reach it), so a TCP relay on the node's address carries the bytes,
// TLS untouched, to it. The serving certificate names the ClusterIP, so clients verify it as usual.
const (
	// APIServerServiceIP is the kubernetes Service's ClusterIP, the first of the service range.
	APIServerServiceIP = "10.0.0.1"
	// natChain held the DNAT earlier nodes wrote before kube-proxy did it; a stale one is removed.
	natChain = "CERULEAN-SERVICES"
)

// natJumps are the jumps to natChain, to delete them.
var natJumps = [][]string{{"PREROUTING", "-i", Bridge, "-j", natChain}, {"OUTPUT", "-j", natChain}}

// relay copies TCP connections from a listener to a target address.
type relay struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// startRelay listens on addr and relays every connection to target until stop.
func startRelay(addr, target string) (*relay, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for pods' kube-apiserver traffic on %s: %w", addr, err)
	}
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed by stop
		}
		r.wg.Add(1)
		go r.pipe(c)
	}
}

func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.conns == nil { // stopped
			return false
		}
		r.conns[c] = struct{}{}
	} else if r.conns != nil {
		delete(r.conns, c)
	}
	return true
}

func (r *relay) pipe(c net.Conn) {
	defer r.wg.Done()
	defer c.Close()
	var d net.Dialer
	up, err := d.DialContext(context.Background(), "tcp", r.target)
	if err != nil {
		return // the client sees its connection closed, as with a stopped kube-apiserver
	}
	defer up.Close()
	if !r.track(c, true) || !r.track(up, true) {
		return
	}
	defer r.track(c, false)
	defer r.track(up, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// stop closes the listener and every relayed connection, and waits for them.
func (r *relay) stop() error {
	if r == nil {
		return nil
	}
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
