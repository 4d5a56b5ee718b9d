package admin

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// Fault rules and the request log, for tests and scripts that drive a cloud running as a
// process. Same gate as the rest of the API: loopback, and the subscription Owner's ARM token.

// maxFaultBody is the largest fault configuration accepted.
const maxFaultBody = 1 << 20

func (a *API) registerFaults(mux *http.ServeMux, h func(httpx.Handler) http.Handler) {
	if a.o.Faults != nil {
		mux.Handle("GET "+Prefix+"/faults", h(a.getFaults))
		mux.Handle("PUT "+Prefix+"/faults", h(a.putFaults))
		mux.Handle("DELETE "+Prefix+"/faults", h(a.deleteFaults))
	}
	if a.o.Requests != nil {
		mux.Handle("GET "+Prefix+"/requests", h(a.getRequests))
		mux.Handle("DELETE "+Prefix+"/requests", h(a.deleteRequests))
	}
}

// FaultsView is the active configuration with what each counted rule has left (-1: no limit).
type FaultsView struct {
	faults.Config
	Left []int `json:"left"`
}

func (a *API) faultsView() FaultsView {
	c, left := a.o.Faults.Config()
	if c.Rules == nil {
		c.Rules = []faults.Rule{}
	}
	if left == nil {
		left = []int{}
	}
	return FaultsView{Config: c, Left: left}
}

func (a *API) getFaults(*http.Request) (httpx.Response, error) {
	return httpx.Response{Body: a.faultsView()}, nil
}

// putFaults replaces the rules with the body, JSON or YAML; an invalid body changes nothing.
func (a *API) putFaults(r *http.Request) (httpx.Response, error) {
	body, err := httpx.ReadBody(r, maxFaultBody)
	if errors.Is(err, httpx.ErrTooLarge) {
		return httpx.Response{}, &Error{http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "The fault configuration is too large."}
	} else if err != nil {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidRequestContent", "The request body could not be read."}
	}
	cfg, err := faults.Parse(body)
	if err == nil {
		err = a.o.Faults.Set(cfg)
	}
	if err != nil {
		return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidFaultConfiguration", err.Error()}
	}
	return httpx.Response{Body: a.faultsView()}, nil
}

func (a *API) deleteFaults(*http.Request) (httpx.Response, error) {
	if err := a.o.Faults.Set(faults.Config{}); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusNoContent}, nil
}

// RequestsView is the answer to GET /requests: the selected entries and the newest sequence
// number (for a later ?since=).
type RequestsView struct {
	Value []reqlog.Entry `json:"value"`
	Last  uint64         `json:"last"`
}

// getRequests filters on service, method, pathPrefix, principalId, vault, status and since.
func (a *API) getRequests(r *http.Request) (httpx.Response, error) {
	q := r.URL.Query()
	f := reqlog.Filter{Service: q.Get("service"), Method: q.Get("method"), PathPrefix: q.Get("pathPrefix"),
		Principal: q.Get("principalId"), Vault: q.Get("vault")}
	var err error
	if s := q.Get("status"); s != "" {
		if f.Status, err = strconv.Atoi(s); err != nil {
			return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidQueryParameter", "status must be an HTTP status code."}
		}
	}
	if s := q.Get("since"); s != "" {
		if f.Since, err = strconv.ParseUint(s, 10, 64); err != nil {
			return httpx.Response{}, &Error{http.StatusBadRequest, "InvalidQueryParameter", "since must be a sequence number."}
		}
	}
	last := a.o.Requests.Last()
	return httpx.Response{Body: RequestsView{Value: a.o.Requests.Entries(f), Last: last}}, nil
}

func (a *API) deleteRequests(*http.Request) (httpx.Response, error) {
	a.o.Requests.Clear()
	return httpx.Response{Status: http.StatusNoContent}, nil
}
