package httpx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingBody records how much of it was read.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestCompleteBodyDrains: over HTTP/2 what a handler left of the body is read to its end after
// it returns; HTTP/1.x bodies are left to net/http, and a body declared longer than DrainLimit
// is not read at all.
func TestCompleteBodyDrains(t *testing.T) {
	for _, tc := range []struct {
		name     string
		major    int
		size     int
		declared int64
		want     int
	}{
		{"HTTP/2, small body", 2, 1000, 1000, 1000},
		{"HTTP/2, body of unknown length", 2, 3000, -1, 3000},
		{"HTTP/2, body over DrainLimit", 2, 10, DrainLimit + 1, 0},
		{"HTTP/1.1", 1, 1000, 1000, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(strings.Repeat("x", tc.size))}
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.ProtoMajor, r.Body, r.ContentLength = tc.major, body, tc.declared
			handlerRead := 0
			h := CompleteBody(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				handlerRead = body.read // nothing yet: the handler answers unread
				w.WriteHeader(http.StatusUnauthorized)
			}))
			h.ServeHTTP(httptest.NewRecorder(), r)
			if handlerRead != 0 || body.read != tc.want {
				t.Errorf("read %d before the handler returned and %d in all, want 0 and %d", handlerRead, body.read, tc.want)
			}
		})
	}
}
