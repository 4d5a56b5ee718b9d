package arm

import (
	"context"
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/azurenames"
)

// A request that reached ARM as management.azure.com (or management.core.windows.net, through
// the cloud's proxy) gets answers under Azure's public names: its operation URLs name that
// host, its 401 challenge names the public authority, and providers that hand out URLs of
// their own (a vault's vaultUri) ask PublicNames. Any other request gets the cloud's origin.

type publicKey struct{}

// PublicNames reports whether the request of ctx reached ARM under one of Azure's public names.
func PublicNames(ctx context.Context) bool {
	_, ok := ctx.Value(publicKey{}).(string)
	return ok
}

// underPublicName marks a request addressed to a public ARM name and rewrites the cloud's
// origin in the URLs its answer's headers carry; other requests pass unchanged.
func (s *Service) underPublicName(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	host := azurenames.RequestHost(r)
	if !azurenames.IsManagement(host) {
		return w, r
	}
	origin := "https://" + host
	r = r.WithContext(context.WithValue(r.Context(), publicKey{}, origin))
	return &originWriter{ResponseWriter: w, from: s.o.BaseURL, to: origin}, r
}

// originWriter rewrites, just before the header is sent, the operation URLs (Location,
// Azure-AsyncOperation) from the cloud's origin to the public one, and the challenge's
// authorization_uri to Azure's public authority.
type originWriter struct {
	http.ResponseWriter
	from, to string
	wrote    bool
}

func (o *originWriter) WriteHeader(status int) {
	if !o.wrote {
		o.wrote = true
		h := o.Header()
		for _, k := range []string{"Location", "Azure-Asyncoperation"} {
			if v := h.Get(k); strings.HasPrefix(v, o.from+"/") {
				h.Set(k, o.to+strings.TrimPrefix(v, o.from))
			}
		}
		if v := h.Get("Www-Authenticate"); v != "" {
			h.Set("Www-Authenticate", strings.Replace(v, `authorization_uri="`+o.from+"/", `authorization_uri="https://`+azurenames.LoginHost+"/", 1))
		}
	}
	o.ResponseWriter.WriteHeader(status)
}

func (o *originWriter) Write(b []byte) (int, error) {
	if !o.wrote {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (o *originWriter) Unwrap() http.ResponseWriter { return o.ResponseWriter }
