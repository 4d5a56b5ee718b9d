package entra

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

// Error is an Entra ID protocol error: an OAuth error string, an AADSTS code and a message. The
// message must never contain a secret or a token; it may name identifiers (client id, issuer,
// subject, audience, thumbprints) as Entra's own messages do.
type Error struct {
	Status  int    // HTTP status
	OAuth   string // "invalid_client", "invalid_request", ...
	Code    int    // the AADSTS number
	Message string // without the "AADSTSnnn: " prefix
}

func (e *Error) Error() string { return fmt.Sprintf("%s: AADSTS%d: %s", e.OAuth, e.Code, e.Message) }

func newError(status int, oauth string, code int, format string, args ...any) *Error {
	return &Error{Status: status, OAuth: oauth, Code: code, Message: fmt.Sprintf(format, args...)}
}

// The codes Cerulean reproduces, with Entra's status and OAuth error for each.
func errInvalidSecret(clientID string) *Error {
	return newError(http.StatusUnauthorized, "invalid_client", 7000215,
		"Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '%s'.", clientID)
}

func errAppNotFound(clientID, tenantID string) *Error {
	return newError(http.StatusBadRequest, "unauthorized_client", 700016,
		"Application with identifier '%s' was not found in the directory '%s'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant. You may have sent your authentication request to the wrong tenant.", clientID, tenantID)
}

func errNoFederatedIssuer(a *assertion) *Error {
	return newError(http.StatusBadRequest, "invalid_request", 70021,
		"No matching federated identity record found for presented assertion. Assertion Issuer: '%s'. Assertion Subject: '%s'. Assertion Audience: '%s'.", a.Issuer, a.Subject, a.audience())
}

func errNoFederatedMatch(a *assertion) *Error {
	return newError(http.StatusUnauthorized, "invalid_client", 700213,
		"No matching federated identity record found for presented assertion subject '%s'. Check your federated identity credential Subject, Audience and Issuer against the presented assertion. Assertion Issuer: '%s'. Assertion Subject: '%s'. Assertion Audience: '%s'.", a.Subject, a.Issuer, a.Subject, a.audience())
}

func errAssertionTime(now time.Time) *Error {
	return newError(http.StatusBadRequest, "invalid_client", 700024,
		"Client assertion is not within its valid time range. Current time: %s.", now.UTC().Format(time.RFC3339))
}

func errAssertionInvalid(format string, args ...any) *Error {
	return newError(http.StatusUnauthorized, "invalid_client", 700027, "Client assertion failed signature validation. "+format, args...)
}

func errMalformedAssertion() *Error {
	return newError(http.StatusBadRequest, "invalid_request", 50027, "JWT token is invalid or malformed.")
}

func errTenantNotFound(tenant, oauth string) *Error {
	return newError(http.StatusBadRequest, oauth, 90002,
		"Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.", tenant)
}

func errNoTenant() *Error {
	return newError(http.StatusBadRequest, "invalid_request", 50059,
		"No tenant-identifying information found in either the request or implied by any provided credentials.")
}

func errInvalidScope(scope string) *Error {
	return newError(http.StatusBadRequest, "invalid_scope", 70011,
		"The provided request must include a 'scope' input parameter. The provided value for the input parameter 'scope' is not valid. The scope %s is not valid.", scope)
}

func errMissingParam(name string) *Error {
	return newError(http.StatusBadRequest, "invalid_request", 900144,
		"The request body must contain the following parameter: '%s'.", name)
}

func errNoCredential() *Error {
	return newError(http.StatusUnauthorized, "invalid_client", 7000218,
		"The request body must contain the following parameter: 'client_assertion' or 'client_secret'.")
}

func errBadRequest(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, "invalid_request", 90014, format, args...)
}

func errTooLarge() *Error {
	return newError(http.StatusRequestEntityTooLarge, "invalid_request", 90020, "The request body is too large.")
}

func errGrantType(g string) *Error {
	return newError(http.StatusBadRequest, "unsupported_grant_type", 70003,
		"The app requested an unsupported grant type '%s'.", g)
}

func errMethod() *Error {
	return newError(http.StatusMethodNotAllowed, "invalid_request", 900561,
		"The endpoint only accepts POST, OPTIONS requests. Received a GET request.")
}

func errUnknownInstance() *Error {
	return newError(http.StatusBadRequest, "invalid_instance", 50049, "Unknown or invalid instance.")
}

func errExternalOIDC(issuer string) *Error {
	return newError(http.StatusBadRequest, "invalid_request", 50166,
		"Request to External OIDC endpoint failed. Issuer: '%s'.", issuer)
}

func errNotFound() *Error {
	return newError(http.StatusNotFound, "invalid_request", 900561, "The requested endpoint does not exist.")
}

// wireError is Entra's JSON error body.
type wireError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	ErrorCodes       []int  `json:"error_codes"`
	Timestamp        string `json:"timestamp"`
	TraceID          string `json:"trace_id"`
	CorrelationID    string `json:"correlation_id"`
	ErrorURI         string `json:"error_uri,omitempty"`
}

// errorWriter renders any error in Entra's shape; errors that are not *Error are internal, are
// logged, and reach the client only as a generic server error.
func errorWriter(log *slog.Logger, now func() time.Time) httpx.ErrorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) int {
		var e *Error
		if !errors.As(err, &e) {
			log.ErrorContext(r.Context(), "Request failed", "path", r.URL.Path, "err", err)
			e = newError(http.StatusInternalServerError, "server_error", 50000,
				"There was an error issuing a token or an authorization code. Please try again at a later time.")
		}
		ts := now().UTC().Format("2006-01-02 15:04:05Z")
		trace := uuid.NewString()
		corr := r.Header.Get("client-request-id")
		if _, perr := uuid.Parse(corr); perr != nil {
			corr = uuid.NewString()
		}
		body := wireError{
			Error:            e.OAuth,
			ErrorDescription: fmt.Sprintf("AADSTS%d: %s Trace ID: %s Correlation ID: %s Timestamp: %s", e.Code, e.Message, trace, corr, ts),
			ErrorCodes:       []int{e.Code},
			Timestamp:        ts,
			TraceID:          trace,
			CorrelationID:    corr,
			ErrorURI:         fmt.Sprintf("https://login.microsoftonline.com/error?code=%d", e.Code),
		}
		log.InfoContext(r.Context(), "Rejected request", "path", r.URL.Path, "status", e.Status, "error", e.OAuth, "code", e.Code)
		return httpx.Write(w, httpx.Response{Status: e.Status, Body: body})
	}
}
