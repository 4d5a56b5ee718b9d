package faults

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// armCodes, keyVaultCodes and entraCodes are the error code (ARM, Key Vault) or the OAuth error
// and AADSTS number (Entra ID) each injected status is answered with.
var armCodes = map[int]string{
	http.StatusInternalServerError: "InternalServerError",
	http.StatusServiceUnavailable:  "ServiceUnavailable",
	http.StatusConflict:            "Conflict",
	http.StatusTooManyRequests:     "TooManyRequests",
}

var keyVaultCodes = map[int]string{
	http.StatusInternalServerError: "InternalServerError",
	http.StatusServiceUnavailable:  "ServiceUnavailable",
	http.StatusConflict:            "Conflict",
	http.StatusTooManyRequests:     "Throttled",
}

type aadCode struct {
	oauth string
	code  int
}

var entraCodes = map[int]aadCode{
	http.StatusInternalServerError: {"server_error", 50000},
	http.StatusServiceUnavailable:  {"temporarily_unavailable", 90033},
	http.StatusConflict:            {"invalid_request", 90036},
	http.StatusTooManyRequests:     {"temporarily_unavailable", 50196},
}

// Answer is the error response of an injected status, in the service's wire format, with
// Retry-After (seconds) and x-ms-retry-after-ms on 429 and 503. Messages say the fault was
// injected and by which rule, so nobody mistakes it for a bug.
func Answer(service, rule string, status int, retryAfter time.Duration, now time.Time) httpx.Response {
	msg := fmt.Sprintf("%s (injected fault '%s').", http.StatusText(status), rule)
	h := http.Header{}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
		h.Set("X-Ms-Retry-After-Ms", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	var body any
	switch service {
	case ServiceEntra:
		c := entraCodes[status]
		trace, corr := uuid.NewString(), uuid.NewString()
		ts := now.UTC().Format("2006-01-02 15:04:05Z")
		body = map[string]any{
			"error":             c.oauth,
			"error_description": fmt.Sprintf("AADSTS%d: %s Trace ID: %s Correlation ID: %s Timestamp: %s", c.code, msg, trace, corr, ts),
			"error_codes":       []int{c.code}, "timestamp": ts, "trace_id": trace, "correlation_id": corr,
		}
	case ServiceMSI:
		body = map[string]string{"error": "service_unavailable", "error_description": msg}
		if status == http.StatusTooManyRequests {
			body = map[string]string{"error": "too_many_requests", "error_description": msg}
		}
	case ServiceKeyVault:
		body = map[string]any{"error": map[string]string{"code": keyVaultCodes[status], "message": msg}}
	default:
		code := armCodes[status]
		h.Set("X-Ms-Error-Code", code)
		body = map[string]any{"error": map[string]string{"code": code, "message": msg}}
	}
	return httpx.Response{Status: status, Header: h, Body: body}
}
