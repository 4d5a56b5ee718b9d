package httpx

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"
)

// InFlight counts the requests a server is serving, so that shutting it down can wait for them
// and for nothing else.
type InFlight struct{ n atomic.Int64 }

// Wrap counts h's requests.
func (f *InFlight) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		defer f.n.Add(-1)
		h.ServeHTTP(w, r)
	})
}

// Shutdown stops srv: it accepts nothing new, lets the requests in flight finish (within ctx),
// then closes every connection. http.Server.Shutdown alone would also wait, a second per
// HTTP/2 connection, for clients to hang up after its GOAWAY, even when nothing is in flight.
func Shutdown(ctx context.Context, srv *http.Server, inflight *InFlight) error {
	stopping := make(chan struct{})
	srv.RegisterOnShutdown(func() { close(stopping) })
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(ctx) }()
	select {
	case <-stopping: // listeners closed, no new requests
	case err := <-shut:
		return err
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for inflight.n.Load() > 0 && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	// The handlers have returned, but HTTP/2 writes a response's last frames after that: closing
	// now could cut them. Clients hang up once they have them (GOAWAY is sent), which ends
	// srv.Shutdown; wait for that a moment, no longer.
	drain := time.NewTimer(drainGrace)
	defer drain.Stop()
	select {
	case err := <-shut:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		return errors.Join(err, srv.Close())
	case <-drain.C:
	case <-ctx.Done():
	}
	closeErr := srv.Close()
	if err := <-shut; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(err, closeErr)
	}
	return closeErr
}

// drainGrace bounds the wait for clients to hang up once nothing is in flight.
const drainGrace = 500 * time.Millisecond
