package cloud

import (
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/admin"
	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/faults"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/midataplane"
	"github.com/cerulean/cerulean/internal/cloud/msi"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/cloud/webview"
)

// Throttling, fault injection and the request log. Kept apart from server.go so each part of
// the cloud owns its file.

// applyThrottle turns on Azure's default limits where Options.Throttle asks for them and no
// explicit limits were given.
func (o *Options) applyThrottle() {
	if !o.Throttle {
		return
	}
	if o.ARM.Limits == nil {
		l := arm.DefaultLimits
		o.ARM.Limits = &l
	}
	if o.KeyVaultLimits == nil {
		l := keyvault.DefaultLimits
		o.KeyVaultLimits = &l
	}
}

// startFaults makes the injector (with opts.Faults, refused if invalid) and the request log.
func (c *Cloud) startFaults(opts Options) error {
	c.faults = faults.New()
	if opts.Faults != nil {
		if err := c.faults.Set(*opts.Faults); err != nil {
			return err
		}
	}
	c.requests = reqlog.New(opts.RequestLogSize)
	c.now = opts.Clock
	return nil
}

// Faults is the fault injector: tests set rules on it in-process (the admin API does the same
// over HTTPS).
func (c *Cloud) Faults() *faults.Injector { return c.faults }

// Requests returns the logged requests f selects, oldest first.
func (c *Cloud) Requests(f reqlog.Filter) []reqlog.Entry { return c.requests.Entries(f) }

// RequestLog is the request log itself (Last, Count, Clear).
func (c *Cloud) RequestLog() *reqlog.Log { return c.requests }

// serviceOf names the service a request on the main listener is for; "" for the admin API,
// which is neither logged nor faulted (faults must never lock out the API that removes them).
func serviceOf(r *http.Request) string {
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, admin.Prefix+"/"), p == webview.Prefix || strings.HasPrefix(p, webview.Prefix+"/"):
		return "" // the web view is not logged either: it reads the log
	case arm.Handles(p), p == "/metadata/endpoints": // the cloud-metadata document is ARM's
		return faults.ServiceARM
	case p == msi.AppServicePath || p == msi.IMDSPath || p == midataplane.Path:
		return faults.ServiceMSI
	default:
		return faults.ServiceEntra
	}
}

// observe wraps a listener's handler: it logs every request of service(r) and applies the fault
// rules before the service sees it.
func (c *Cloud) observe(service func(r *http.Request) string, vault string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc := service(r)
		if svc == "" {
			next.ServeHTTP(w, r)
			return
		}
		start := c.now()
		ctx, principal := reqlog.WithSlot(r.Context())
		rw := &statusWriter{ResponseWriter: w}
		d := c.faults.Decide(faults.Request{Service: svc, Method: r.Method, ResourceType: armType(svc, r.URL.Path)})
		switch {
		case faults.Sleep(ctx, d.Latency) != nil:
			// The client went away during the added latency: nothing to answer.
		case d.Status != 0:
			res := faults.Answer(svc, d.Rule, d.Status, d.RetryAfter, c.now())
			if r.Method == http.MethodHead {
				res.Body = nil
			}
			httpx.Write(rw, res)
		default:
			if d.LRO != nil && svc == faults.ServiceARM {
				ctx = faults.WithLRO(ctx, d.Rule, *d.LRO)
			}
			next.ServeHTTP(rw, r.WithContext(ctx))
		}
		// Only the path and the api-version: other query values (resource, client_id) and every
		// header stay out of the log.
		c.requests.Add(reqlog.Entry{Time: start.UTC(), Service: svc, Vault: vault, Method: r.Method, Path: r.URL.Path,
			APIVersion: apiVersion(r), Principal: principal(), Status: rw.status, Fault: d.Rule, Reason: reqlog.ReasonOf(ctx)})
	})
}

// observeVault is the Key Vault data plane's middleware, one per vault.
func (c *Cloud) observeVault(vault string, h http.Handler) http.Handler {
	return c.observe(func(*http.Request) string { return faults.ServiceKeyVault }, vault, h)
}

func apiVersion(r *http.Request) string {
	v := r.URL.Query().Get("api-version")
	if len(v) > 32 {
		return "" // not a version: nothing worth keeping
	}
	return v
}

// armType is the ARM resource type a request addresses, for rules that name one.
func armType(svc, path string) string {
	if svc != faults.ServiceARM {
		return ""
	}
	id, err := armid.Parse(path)
	if err != nil {
		return ""
	}
	return id.ResourceType()
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
