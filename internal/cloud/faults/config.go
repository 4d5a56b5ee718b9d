// Package faults injects Azure's failure modes on purpose: added latency, error answers (500,
// 503, 409, 429) and long-running operations that take N polls or end Failed, chosen per
// operation (HTTP method) and resource type. Rules come from a JSON or YAML file or the admin
// API; "the next N matching requests" and a seeded random source keep tests deterministic.
package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Services a rule's resourceType may name instead of an ARM type.
const (
	ServiceARM      = "arm"
	ServiceKeyVault = "keyvault"
	ServiceEntra    = "entra"
	ServiceMSI      = "msi"
)

// Statuses a rule may answer with: the failures Azure clients must survive.
var Statuses = []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusConflict, http.StatusTooManyRequests}

// LRO outcomes.
const (
	ResultSucceeded = "Succeeded"
	ResultFailed    = "Failed"
	ResultCanceled  = "Canceled"
)

// Bounds that keep a typo from hanging a client.
const (
	maxLatency    = 5 * time.Minute
	maxRetryAfter = 10 * time.Minute
	maxPolls      = 1000
	maxRules      = 1000
	maxConfig     = 1 << 20
)

// DefaultRetryAfter is what a 429 or 503 rule advertises when it names no retryAfter.
const DefaultRetryAfter = time.Second

// ErrInvalid marks a configuration that was refused.
var ErrInvalid = errors.New("invalid fault configuration")

// Config is a fault configuration: rules are tried in order for every request.
type Config struct {
	// Seed seeds the random source that rate-based rules draw from; the same seed and the same
	// requests give the same faults.
	Seed  uint64 `json:"seed,omitempty"`
	Rules []Rule `json:"rules"`
}

// Rule is one fault. A rule with only a latency delays matching requests and lets later rules
// decide; the first rule with a status or an lro that fires answers the request.
type Rule struct {
	Name         string   `json:"name,omitempty"`         // shown in the request log; default "rules[i]"
	Method       string   `json:"method,omitempty"`       // HTTP method; "" = any
	ResourceType string   `json:"resourceType,omitempty"` // an ARM type, or arm, keyvault, entra, msi; "" = any
	Latency      Duration `json:"latency,omitempty"`      // added before the answer
	Status       int      `json:"status,omitempty"`       // 500, 503, 409 or 429, in the service's error shape
	RetryAfter   Duration `json:"retryAfter,omitempty"`   // advertised on 429 and 503; default 1s
	Rate         float64  `json:"rate,omitempty"`         // share of matching requests that fail, 0 < rate <= 1; default 1
	Count        int      `json:"count,omitempty"`        // fire for the next N matching requests only; 0 = no limit
	LRO          *LRO     `json:"lro,omitempty"`          // turn a matching ARM write into a long-running operation
}

// LRO makes a matching ARM write long-running: its operation reports InProgress for Polls
// polls, then Result. A Failed or Canceled operation makes no change.
type LRO struct {
	Polls   int    `json:"polls"`
	Result  string `json:"result,omitempty"`  // Succeeded (default), Failed or Canceled
	Code    string `json:"code,omitempty"`    // the error code of a failed operation
	Message string `json:"message,omitempty"` // its message
}

// Duration is a time.Duration written as "250ms", "2s" in JSON and YAML.
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "250ms" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("a duration is a string such as \"250ms\": %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("parse duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Parse reads a configuration in JSON or YAML (JSON is YAML), refusing unknown fields and
// values out of bounds.
func Parse(b []byte) (Config, error) {
	if len(b) > maxConfig {
		return Config{}, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, maxConfig)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Load reads and parses a configuration file.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("read fault configuration: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

var methods = []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodPost, http.MethodDelete}

// Validate reports the first rule that is out of bounds, by its index.
func (c Config) Validate() error {
	if len(c.Rules) > maxRules {
		return fmt.Errorf("%w: more than %d rules", ErrInvalid, maxRules)
	}
	for i, r := range c.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("%w: rules[%d]: %w", ErrInvalid, i, err)
		}
	}
	return nil
}

func (r Rule) validate() error {
	if r.Method != "" && !slices.Contains(methods, strings.ToUpper(r.Method)) {
		return fmt.Errorf("method %q is not one of %s", r.Method, strings.Join(methods, ", "))
	}
	if t := r.ResourceType; t != "" && !isService(t) && !isARMType(t) {
		return fmt.Errorf("resourceType %q is neither an ARM type (Namespace/type) nor one of arm, keyvault, entra, msi", t)
	}
	switch {
	case r.Latency < 0 || time.Duration(r.Latency) > maxLatency:
		return fmt.Errorf("latency %s is not between 0 and %s", time.Duration(r.Latency), maxLatency)
	case r.RetryAfter < 0 || time.Duration(r.RetryAfter) > maxRetryAfter:
		return fmt.Errorf("retryAfter %s is not between 0 and %s", time.Duration(r.RetryAfter), maxRetryAfter)
	case r.Rate < 0 || r.Rate > 1:
		return fmt.Errorf("rate %v is not between 0 and 1", r.Rate)
	case r.Count < 0:
		return fmt.Errorf("count %d is negative", r.Count)
	case r.Status != 0 && !slices.Contains(Statuses, r.Status):
		return fmt.Errorf("status %d is not one of 500, 503, 409, 429", r.Status)
	case r.Status != 0 && r.LRO != nil:
		return errors.New("status and lro exclude each other")
	case r.Status == 0 && r.LRO == nil && r.Latency == 0:
		return errors.New("the rule does nothing: give it a latency, a status or an lro")
	}
	if r.LRO != nil {
		return r.validateLRO()
	}
	return nil
}

func (r Rule) validateLRO() error {
	switch m := strings.ToUpper(r.Method); {
	case m != http.MethodPut && m != http.MethodPatch && m != http.MethodPost && m != http.MethodDelete:
		return errors.New("an lro rule needs method PUT, PATCH, POST or DELETE")
	case r.ResourceType != "" && isService(r.ResourceType) && !strings.EqualFold(r.ResourceType, ServiceARM):
		return errors.New("an lro rule applies to ARM writes only")
	case r.LRO.Polls < 0 || r.LRO.Polls > maxPolls:
		return fmt.Errorf("lro.polls %d is not between 0 and %d", r.LRO.Polls, maxPolls)
	}
	switch r.LRO.Result {
	case "", ResultSucceeded, ResultFailed, ResultCanceled:
	default:
		return fmt.Errorf("lro.result %q is not Succeeded, Failed or Canceled", r.LRO.Result)
	}
	return nil
}

func isService(t string) bool {
	return slices.ContainsFunc([]string{ServiceARM, ServiceKeyVault, ServiceEntra, ServiceMSI}, func(s string) bool { return strings.EqualFold(s, t) })
}

// isARMType accepts Namespace/type[/childType...] with non-empty parts.
func isARMType(t string) bool {
	parts := strings.Split(t, "/")
	if len(parts) < 2 || !strings.Contains(parts[0], ".") {
		return false
	}
	return !slices.Contains(parts, "")
}
