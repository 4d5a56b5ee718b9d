// Package httpx turns the emulator's handlers, which return values, into http.Handlers. Each
// service (Entra ID, ARM, Key Vault) supplies the one function that writes its errors in its own
// wire format, so no handler writes an ad-hoc error body.
package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// Response is what a handler answers on success.
type Response struct {
	Status int         // 0 means 200
	Header http.Header // extra headers
	Body   any         // encoded as JSON; nil writes no body
}

// Handler serves one request.
type Handler func(r *http.Request) (Response, error)

// ErrorWriter renders an error returned by a Handler in a service's wire format, and reports the
// HTTP status it wrote.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, err error) int

// Adapt makes an http.Handler of h, logging one line per request (method, path, status: never the
// query, headers or body, which carry secrets). What h left of the request body is drained before
// the answer is written (DrainBody), so that the answer arrives whole over HTTP/2.
func Adapt(log *slog.Logger, h Handler, writeErr ErrorWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := h(r)
		DrainBody(r)
		status := 0
		if err != nil {
			status = writeErr(w, r, err)
		} else {
			status = Write(w, res)
		}
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelError
		}
		log.Log(r.Context(), level, "Served request", "method", r.Method, "path", r.URL.Path, "status", status)
	})
}

// Write writes a successful response as JSON.
func Write(w http.ResponseWriter, res Response) int {
	status := res.Status
	if status == 0 {
		status = http.StatusOK
	}
	for k, vs := range res.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if res.Body == nil {
		w.WriteHeader(status)
		return status
	}
	body, err := json.Marshal(res.Body)
	if err != nil {
		// Bodies are our own structs; failing to encode one is a programming error.
		w.WriteHeader(http.StatusInternalServerError)
		return http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}

// ErrTooLarge is returned by ReadBody when the body exceeds the limit.
var ErrTooLarge = errors.New("request body too large")

// ReadBody reads at most limit bytes of the body; a longer body is ErrTooLarge, and is not read
// further.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, ErrTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}
