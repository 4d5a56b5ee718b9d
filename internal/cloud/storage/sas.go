package storage

import (
	"crypto/hmac"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Shared access signatures: account SAS (ss, srt) and service SAS (sr, or a queue's or table's
// own), signed with one of the account's keys. Stored access policies (si) and user delegation
// SAS are not served.

// sasParams are the query parameters that belong to a SAS; they are dropped before forwarding.
var sasParams = map[string]bool{
	"sv": true, "ss": true, "srt": true, "sp": true, "se": true, "st": true, "sip": true, "spr": true,
	"sig": true, "sr": true, "si": true, "ses": true, "tn": true, "spk": true, "srk": true, "epk": true,
	"erk": true, "skoid": true, "sktid": true, "skt": true, "ske": true, "sks": true, "skv": true,
	"saoid": true, "suoid": true, "scid": true, "sdd": true, "rscc": true, "rscd": true, "rsce": true,
	"rscl": true, "rsct": true, "sduoid": true, "skdutid": true,
}

// sasError is why a SAS is refused: Azure's AuthenticationFailed (403), or
// AuthorizationPermissionMismatch and friends when the signature holds but does not cover the
// operation.
type sasError struct {
	code, msg string
}

func (e *sasError) Error() string { return e.code + ": " + e.msg }

const authFailed = "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature."

// checkSAS verifies the SAS in q for op on service of account at now.
func checkSAS(q url.Values, service, account string, o op, keys [][]byte, now time.Time) error {
	sv, sig := q.Get("sv"), q.Get("sig")
	if sv == "" || sig == "" || q.Get("se") == "" && q.Get("si") == "" {
		return &sasError{"AuthenticationFailed", authFailed + "\nsv, sig and se are mandatory."}
	}
	if q.Get("si") != "" {
		return &sasError{"AuthenticationFailed", authFailed + "\nStored access policies are not served by the local cloud."}
	}
	var candidates []string
	accountSAS := q.Has("ss")
	if accountSAS {
		s := strings.Join([]string{account, q.Get("sp"), q.Get("ss"), q.Get("srt"), q.Get("st"), q.Get("se"), q.Get("sip"), q.Get("spr"), sv}, "\n") + "\n"
		if sv >= "2020-12-06" {
			s += q.Get("ses") + "\n"
		}
		candidates = append(candidates, s)
	} else {
		s, err := serviceSASString(q, service, account, o)
		if err != nil {
			return err
		}
		candidates = append(candidates, s)
	}
	valid := false
	for _, s := range candidates {
		for _, k := range keys {
			if hmac.Equal([]byte(sign(k, s)), []byte(sig)) {
				valid = true
			}
		}
	}
	if !valid {
		return &sasError{"AuthenticationFailed", authFailed + "\nSignature did not match."}
	}
	start, expiry := q.Get("st"), q.Get("se")
	se, err := parseSASTime(expiry)
	if err != nil {
		return &sasError{"AuthenticationFailed", authFailed + "\nsignedexpiry is not a valid time."}
	}
	st := time.Time{}
	if start != "" {
		if st, err = parseSASTime(start); err != nil {
			return &sasError{"AuthenticationFailed", authFailed + "\nsignedstart is not a valid time."}
		}
	}
	if now.Before(st) || now.After(se) {
		return &sasError{"AuthenticationFailed", fmt.Sprintf("%s\nSigned expiry time [%s] must be after signed start time [%s] and current time [%s]. The SAS is not valid in the specified time frame.",
			authFailed, se.UTC().Format(http1123), st.UTC().Format(http1123), now.UTC().Format(http1123))}
	}
	if p := q.Get("spr"); p != "" && p != "https" && p != "https,http" {
		return &sasError{"AuthenticationFailed", authFailed + "\nsignedprotocol is not valid."}
	}
	if accountSAS {
		if !strings.Contains(q.Get("ss"), service[:1]) {
			return &sasError{"AuthorizationServiceMismatch", "This request is not authorized to perform this operation using this service."}
		}
		if !strings.ContainsRune(q.Get("srt"), rune(o.level)) {
			return &sasError{"AuthorizationResourceTypeMismatch", "This request is not authorized to perform this operation using this resource type."}
		}
	}
	if !strings.ContainsAny(q.Get("sp"), o.perms) {
		return &sasError{"AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission."}
	}
	return nil
}

const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

func parseSASTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("parse SAS time %q", s)
}

// serviceSASString is the string a service SAS signs, for the SAS versions the SDKs send.
func serviceSASString(q url.Values, service, account string, o op) (string, error) {
	common := []string{q.Get("sp"), q.Get("st"), q.Get("se")}
	switch service {
	case "blob":
		sr := q.Get("sr")
		resource := "/blob/" + account + "/" + o.container
		switch sr {
		case "c":
		case "b", "bs", "bv":
			resource += "/" + o.object
		default:
			return "", &sasError{"AuthenticationFailed", authFailed + "\nsignedresource is not served."}
		}
		if o.container == "" || (sr == "c" && o.level == 's') {
			return "", &sasError{"AuthorizationResourceTypeMismatch", "This request is not authorized to perform this operation using this resource type."}
		}
		snapshot := q.Get("sst")
		return strings.Join(append(common, resource, q.Get("si"), q.Get("sip"), q.Get("spr"), q.Get("sv"), sr, snapshot,
			q.Get("ses"), q.Get("rscc"), q.Get("rscd"), q.Get("rsce"), q.Get("rscl"), q.Get("rsct")), "\n"), nil
	case "queue":
		if o.container == "" {
			return "", &sasError{"AuthorizationResourceTypeMismatch", "This request is not authorized to perform this operation using this resource type."}
		}
		return strings.Join(append(common, "/queue/"+account+"/"+o.container, q.Get("si"), q.Get("sip"), q.Get("spr"), q.Get("sv")), "\n"), nil
	}
	tn := strings.ToLower(q.Get("tn"))
	if tn == "" || !strings.EqualFold(tn, o.container) {
		return "", &sasError{"AuthorizationResourceTypeMismatch", "This request is not authorized to perform this operation using this resource type."}
	}
	return strings.Join(append(common, "/table/"+account+"/"+tn, q.Get("si"), q.Get("sip"), q.Get("spr"), q.Get("sv"),
		q.Get("spk"), q.Get("srk"), q.Get("epk"), q.Get("erk")), "\n"), nil
}

// forwardSAS is the account SAS the front adds to each request it forwards: every service,
// resource type and permission, signed with Azurite's key.
func forwardSAS(account string, key []byte, now time.Time) url.Values {
	const sv, sp, ss, srt = "2020-08-04", "rwdlacuptfxi", "bqt", "sco"
	se := now.Add(10 * 365 * 24 * time.Hour).UTC().Format("2006-01-02T15:04:05Z")
	s := strings.Join([]string{account, sp, ss, srt, "", se, "", "", sv}, "\n") + "\n"
	return url.Values{"sv": {sv}, "sp": {sp}, "ss": {ss}, "srt": {srt}, "se": {se}, "sig": {sign(key, s)}}
}
