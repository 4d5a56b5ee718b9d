package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// The cloud's clock, for tests that drive a cloud running as a process (as `cerulean-local up` runs
// it) past a token's expiry: it only moves forward, so nothing issued appears to come from the
// future. Same gate as the rest of the API.

// MaxAdvance bounds one advance: enough to expire any token, not enough to age out the CA.
const MaxAdvance = 48 * time.Hour

// ClockView is the answer of the clock routes.
type ClockView struct {
	Now  time.Time `json:"now"`
	Skew string    `json:"skew"` // how far ahead of the machine's clock the cloud runs
}

func (a *API) registerClock(mux *http.ServeMux, h func(httpx.Handler) http.Handler) {
	if a.o.Skew == nil {
		return
	}
	mux.Handle("GET "+Prefix+"/clock", h(a.getClock))
	mux.Handle("POST "+Prefix+"/clock/advance", h(a.advanceClock))
}

func (a *API) clockView() ClockView {
	return ClockView{Now: a.o.Clock().UTC(), Skew: time.Duration(a.o.Skew.Load()).String()}
}

func (a *API) getClock(*http.Request) (httpx.Response, error) {
	return httpx.Response{Body: a.clockView()}, nil
}

// advanceClock moves the cloud's clock forward by the body's `by` (a Go duration, "150s").
func (a *API) advanceClock(r *http.Request) (httpx.Response, error) {
	body, err := httpx.ReadBody(r, maxBody)
	if err != nil {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "The request body could not be read."}
	}
	var req struct {
		By string `json:"by"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "The body must be JSON: {\"by\": \"150s\"}."}
	}
	by, err := time.ParseDuration(req.By)
	if err != nil || by <= 0 || by > MaxAdvance {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidClockAdvance",
			fmt.Sprintf("by %q must be a positive duration of at most %s (the clock never goes back).", req.By, MaxAdvance)}
	}
	a.o.Skew.Add(int64(by))
	a.o.Logger.InfoContext(r.Context(), "Clock advanced", "by", by.String(), "skew", time.Duration(a.o.Skew.Load()).String())
	return httpx.Response{Body: a.clockView()}, nil
}

// Skew is the cloud clock's offset from its base clock, in nanoseconds.
type Skew = atomic.Int64
