package arm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Error is an ARM error: rendered as {"error":{"code","message"}} with the code also in the
// x-ms-error-code header, as azcore reads it.
type Error struct {
	Status  int
	Code    string
	Message string
	Header  http.Header // extra headers (Retry-After, WWW-Authenticate)
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Common errors, with the codes ARM uses.
func errMissingAPIVersion() *Error {
	return Errorf(http.StatusBadRequest, "MissingApiVersionParameter",
		"The api-version query parameter (?api-version=) is required for all requests.")
}

// ErrBadRequest is a 400 with ARM's generic code, for property values a provider rejects.
func ErrBadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "BadRequest", format, args...)
}

// ErrInvalidContent is the 400 for a body that is not the JSON a request needs.
func ErrInvalidContent(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: "+format, args...)
}

// ErrNotFound is the 404 for a missing resource, worded as ARM words it.
func ErrNotFound(id armid.ID) *Error {
	return Errorf(http.StatusNotFound, "ResourceNotFound", "The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
		id.ResourceType(), id.Name(), id.ResourceGroup())
}

// ErrResourceGroupNotFound is the 404 for a missing resource group.
func ErrResourceGroupNotFound(name string) *Error {
	return Errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", name)
}

// ErrInvalidName is the 400 for a name out of a type's bounds.
func ErrInvalidName(name, rule string) *Error {
	return Errorf(http.StatusBadRequest, "InvalidResourceName", "Resource name '%s' is invalid. %s", clip(name, 128), rule)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// writeError is the one place ARM errors are rendered.
func writeError(log *slog.Logger) httpx.ErrorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) int {
		var e *Error
		switch {
		case errors.As(err, &e):
		case errors.Is(err, store.ErrNotFound):
			e = Errorf(http.StatusNotFound, "ResourceNotFound", "The resource was not found.")
		case errors.Is(err, context.Canceled):
			e = Errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "The request was canceled.")
		default:
			log.ErrorContext(r.Context(), "Request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			e = Errorf(http.StatusInternalServerError, "InternalServerError", "The server encountered an internal error. Please retry the request.")
		}
		h := http.Header{"X-Ms-Error-Code": {e.Code}}
		for k, vs := range e.Header {
			h[k] = vs
		}
		body := map[string]any{"error": map[string]string{"code": e.Code, "message": e.Message}}
		if r.Method == http.MethodHead {
			body = nil
		}
		return httpx.Write(w, httpx.Response{Status: e.Status, Header: h, Body: body})
	}
}
