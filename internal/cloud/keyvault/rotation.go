package keyvault

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// rotationPolicy is a key's rotation policy as stored and as sent (KeyRotationPolicy).
type rotationPolicy struct {
	ID              string              `json:"id,omitempty"`
	LifetimeActions []lifetimeAction    `json:"lifetimeActions"`
	Attributes      *rotationAttributes `json:"attributes,omitempty"`
}

type lifetimeAction struct {
	Trigger lifetimeTrigger `json:"trigger"`
	Action  struct {
		Type string `json:"type"`
	} `json:"action"`
}

type lifetimeTrigger struct {
	TimeAfterCreate  *string `json:"timeAfterCreate,omitempty"`
	TimeBeforeExpiry *string `json:"timeBeforeExpiry,omitempty"`
}

type rotationAttributes struct {
	ExpiryTime *string `json:"expiryTime,omitempty"`
	Created    int64   `json:"created,omitempty"`
	Updated    int64   `json:"updated,omitempty"`
}

// defaultRotationPolicy is what Key Vault reports for a key that has none: notify 30 days
// before expiry.
func defaultRotationPolicy() rotationPolicy {
	p := rotationPolicy{LifetimeActions: []lifetimeAction{{Trigger: lifetimeTrigger{TimeBeforeExpiry: ptr("P30D")}}}}
	p.LifetimeActions[0].Action.Type = "Notify"
	return p
}

func ptr[T any](v T) *T { return &v }

// isoDuration is the subset of ISO 8601 durations Key Vault accepts in policies: years, months,
// weeks and days.
var isoDuration = regexp.MustCompile(`^P(?:(\d{1,4})Y)?(?:(\d{1,5})M)?(?:(\d{1,5})W)?(?:(\d{1,6})D)?$`)

// addDuration adds an ISO 8601 duration to t.
func addDuration(t time.Time, d string) (time.Time, bool) {
	m := isoDuration.FindStringSubmatch(strings.ToUpper(d))
	if m == nil || d == "P" || strings.EqualFold(d, "P") {
		return t, false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return t.AddDate(n(m[1]), n(m[2]), 7*n(m[3])+n(m[4])), true
}

func checkDuration(field, d string) error {
	if _, ok := addDuration(time.Unix(0, 0), d); !ok || d == "P" {
		return errBadParameter("Property '%s' must be an ISO 8601 duration such as P90D, P1Y or P3M.", field)
	}
	return nil
}

// parseRotationPolicy checks a PUT body: each action Rotate or Notify with exactly one trigger,
// Notify only before expiry, durations well-formed.
func parseRotationPolicy(body []byte) (rotationPolicy, error) {
	var p rotationPolicy
	if err := decodeObject(body, &p); err != nil {
		return p, err
	}
	if len(p.LifetimeActions) > 2 {
		return p, errBadParameter("A rotation policy has at most one Rotate and one Notify action.")
	}
	seen := map[string]bool{}
	for i := range p.LifetimeActions {
		a := &p.LifetimeActions[i]
		switch strings.ToLower(a.Action.Type) {
		case "rotate":
			a.Action.Type = "Rotate"
		case "notify":
			a.Action.Type = "Notify"
		default:
			return p, errBadParameter("Property 'lifetimeActions.action.type' must be Rotate or Notify.")
		}
		if seen[a.Action.Type] {
			return p, errBadParameter("A rotation policy has at most one %s action.", a.Action.Type)
		}
		seen[a.Action.Type] = true
		t := a.Trigger
		if (t.TimeAfterCreate == nil) == (t.TimeBeforeExpiry == nil) {
			return p, errBadParameter("Each lifetime action needs exactly one of 'timeAfterCreate' and 'timeBeforeExpiry'.")
		}
		if a.Action.Type == "Notify" && t.TimeAfterCreate != nil {
			return p, errBadParameter("A Notify action is triggered by 'timeBeforeExpiry' only.")
		}
		for f, d := range map[string]*string{"timeAfterCreate": t.TimeAfterCreate, "timeBeforeExpiry": t.TimeBeforeExpiry} {
			if d != nil {
				if err := checkDuration(f, *d); err != nil {
					return p, err
				}
			}
		}
	}
	if p.Attributes != nil && p.Attributes.ExpiryTime != nil {
		if err := checkDuration("attributes.expiryTime", *p.Attributes.ExpiryTime); err != nil {
			return p, err
		}
		if floor, _ := addDuration(time.Unix(0, 0), "P28D"); mustAdd(*p.Attributes.ExpiryTime).Before(floor) {
			return p, errBadParameter("Property 'attributes.expiryTime' must be at least 28 days (P28D).")
		}
	}
	return p, nil
}

func mustAdd(d string) time.Time {
	t, _ := addDuration(time.Unix(0, 0), d)
	return t
}

// rotationExpiry is the exp of a version made now under the policy, nil without expiryTime.
func rotationExpiry(p rotationPolicy, now int64) *int64 {
	if p.Attributes == nil || p.Attributes.ExpiryTime == nil {
		return nil
	}
	t, ok := addDuration(time.Unix(now, 0), *p.Attributes.ExpiryTime)
	if !ok {
		return nil
	}
	return ptr(t.Unix())
}
