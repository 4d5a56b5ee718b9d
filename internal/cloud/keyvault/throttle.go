package keyvault

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/ratelimit"
)

// Limits are Key Vault's per-vault token bucket.
type Limits struct {
	Requests  float64 // the bucket: requests a full vault budget allows at once
	PerSecond float64 // refill rate
	// RetryAfter, when set, is the Retry-After a 429 advertises instead of the time until a
	// request is allowed again (tests keep it short; their clock decides refills).
	RetryAfter time.Duration
}

// DefaultLimits are the figure users cite for Key Vault secrets: about 2000 requests per 10 s
// per vault.
var DefaultLimits = Limits{Requests: 2000, PerSecond: 200}

// throttle spends one request of the vault's budget; a nil limits never throttles.
func (s *Service) throttle(vault string) error {
	if s.o.Limits == nil {
		return nil
	}
	l := s.o.Limits
	_, wait := s.buckets.Take(strings.ToLower(vault), ratelimit.Limit{Burst: l.Requests, PerSecond: l.PerSecond})
	if wait == 0 {
		return nil
	}
	if l.RetryAfter > 0 {
		wait = l.RetryAfter
	}
	e := errorf(http.StatusTooManyRequests, "Throttled",
		"Request was not processed because too many requests were received. Reason: VaultRequestTypeLimitReached")
	e.Header = http.Header{
		"Retry-After":         {strconv.Itoa(int((wait + time.Second - 1) / time.Second))},
		"X-Ms-Retry-After-Ms": {strconv.FormatInt(wait.Milliseconds(), 10)},
	}
	return e
}
