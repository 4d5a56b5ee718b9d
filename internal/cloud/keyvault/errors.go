package keyvault

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// Error is a Key Vault error, rendered as
// {"error":{"code","message","innererror":{"code"}}}. Messages name secrets and principals as
// Key Vault's own do, never a secret's value or a token.
type Error struct {
	Status  int
	Code    string
	Message string
	Inner   string      // innererror.code, "" for none
	Header  http.Header // extra headers (WWW-Authenticate)
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) inner(code string) *Error {
	e.Inner = code
	return e
}

func errBadParameter(format string, args ...any) *Error {
	return errorf(http.StatusBadRequest, "BadParameter", format, args...)
}

func errSecretNotFound(name string) *Error {
	return errorf(http.StatusNotFound, "SecretNotFound",
		"A secret with (name/id) %s was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182", name)
}

func errVersionNotFound(name, version string) *Error {
	return errorf(http.StatusNotFound, "SecretNotFound",
		"A secret with (name/id) %s/%s was not found in this key vault. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182", name, version)
}

func errDeletedNotFound(name string) *Error {
	return errorf(http.StatusNotFound, "SecretNotFound", "Deleted Secret not found: %s", name)
}

func errDeletedButRecoverable(name string) *Error {
	return errorf(http.StatusConflict, "Conflict",
		"Secret %s is currently in a deleted but recoverable state, and its name cannot be reused; in this state, the secret can only be recovered or purged.", name).
		inner("ObjectIsDeletedButRecoverable")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// errorBody is Key Vault's error document.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code       string       `json:"code"`
	Message    string       `json:"message"`
	InnerError *innerDetail `json:"innererror,omitempty"`
}

type innerDetail struct {
	Code string `json:"code"`
}

// writeError is the one place Key Vault errors are rendered.
func writeError(log *slog.Logger) httpx.ErrorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) int {
		var e *Error
		switch {
		case errors.As(err, &e):
		case errors.Is(err, context.Canceled):
			e = errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "The request was canceled.")
		default:
			// The error may come from the store; it never carries request content.
			log.ErrorContext(r.Context(), "Request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			e = errorf(http.StatusInternalServerError, "InternalServerError", "The server encountered an internal error. Please retry the request.")
		}
		body := errorBody{Error: errorDetail{Code: e.Code, Message: e.Message}}
		if e.Inner != "" {
			body.Error.InnerError = &innerDetail{Code: e.Inner}
		}
		h := http.Header{"X-Ms-Keyvault-Service-Version": {serviceVersion}}
		for k, vs := range e.Header {
			h[k] = vs
		}
		return httpx.Write(w, httpx.Response{Status: e.Status, Header: h, Body: body})
	}
}
