package httpx

import (
	"io"
	"net/http"
)

// DrainLimit bounds how much of a request body CompleteBody and DrainBody read and discard. It is
// above every service's body cap (ARM's default 1 MiB, a Key Vault restore's 5 MiB), so a body
// refused as too large is still read to its end and its answer arrives.
const DrainLimit = 8 << 20

// DrainBody reads what is left of an HTTP/2 request body (at most DrainLimit bytes) and discards
// it. Call it before answering a request whose body a handler did not read.
//
// Why: when an HTTP/2 handler ends while the client has not finished sending its body, Go's
// server sends the answer and then resets the stream (RST_STREAM NO_ERROR, which RFC 9113 §8.1
// allows). curl 7.88 (Debian's) then fails the transfer with "(92) Stream error in the HTTP/2
// framing layer" and drops the answer it already received — an Entra or admin answer lost,
// although the server acted on the request. Reading the body to its end lets the stream close
// normally. HTTP/1.x needs nothing: net/http drains a small unread body itself and closes the
// connection after a large one, and reading here could prompt a "100 Continue" the client no
// longer needs. A body longer than DrainLimit is left alone, and its stream reset as before.
func DrainBody(r *http.Request) {
	if r.ProtoMajor != 2 || r.Body == nil || r.Body == http.NoBody || r.ContentLength > DrainLimit {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, DrainLimit)
}

// CompleteBody makes next's answers arrive whole over HTTP/2: after next returns, and before the
// server ends the stream, it drains the request body (DrainBody). Every listener of the cloud
// wraps its whole handler in it — the main one, each vault's, and any other front that serves
// the cloud's handlers (such as a forward proxy) must too — so answers written outside Adapt
// (the mux's 404 and 405, injected faults) are covered as well. Over HTTP/2 the answer is only
// sent as the handler returns, so draining here still precedes the end of the answer.
func CompleteBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		DrainBody(r)
	})
}
