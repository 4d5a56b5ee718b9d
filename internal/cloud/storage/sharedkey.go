package storage

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Shared Key and Shared Key Lite, as the storage services define them
// (learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key).

func sign(key []byte, s string) string {
	m := hmac.New(sha256.New, key)
	_, _ = m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sharedKeyStrings are the strings a client may have signed for r with the scheme: one for
// blob and queue's Shared Key, two for its header order (the SDKs sort x-ms- headers with
// Azure's collation, where '-' weighs nothing; plain byte order differs only for rare names).
func sharedKeyStrings(r *http.Request, service, scheme, account string) []string {
	h := r.Header
	date := h.Get("Date")
	if h.Get("X-Ms-Date") != "" {
		date = ""
	}
	switch {
	case service == "table" && scheme == "SharedKeyLite":
		d := h.Get("X-Ms-Date")
		if d == "" {
			d = h.Get("Date")
		}
		return []string{d + "\n" + compResource(r, account)}
	case service == "table":
		d := h.Get("X-Ms-Date")
		if d == "" {
			d = h.Get("Date")
		}
		return []string{strings.Join([]string{r.Method, h.Get("Content-Md5"), h.Get("Content-Type"), d, compResource(r, account)}, "\n")}
	case scheme == "SharedKeyLite":
		var out []string
		for _, ch := range canonicalHeaders(h) {
			out = append(out, strings.Join([]string{r.Method, h.Get("Content-Md5"), h.Get("Content-Type"), date, ch + compResource(r, account)}, "\n"))
		}
		return out
	}
	length := h.Get("Content-Length")
	if length == "" && r.ContentLength > 0 {
		length = strconv.FormatInt(r.ContentLength, 10)
	}
	if length == "0" {
		length = ""
	}
	var out []string
	for _, ch := range canonicalHeaders(h) {
		out = append(out, strings.Join([]string{
			r.Method, h.Get("Content-Encoding"), h.Get("Content-Language"), length, h.Get("Content-Md5"),
			h.Get("Content-Type"), date, h.Get("If-Modified-Since"), h.Get("If-Match"), h.Get("If-None-Match"),
			h.Get("If-Unmodified-Since"), h.Get("Range"), ch + fullResource(r, account),
		}, "\n"))
	}
	return out
}

// canonicalHeaders returns the x-ms- headers block ("name:value\n" each) in byte order and in
// Azure's collation order (the same string when they agree).
func canonicalHeaders(h http.Header) []string {
	var names []string
	for k := range h {
		if n := strings.ToLower(k); strings.HasPrefix(n, "x-ms-") {
			names = append(names, n)
		}
	}
	block := func(names []string) string {
		var b strings.Builder
		for _, n := range names {
			b.WriteString(n + ":" + strings.Join(h.Values(n), ",") + "\n")
		}
		return b.String()
	}
	sort.Strings(names)
	plain := block(names)
	sort.SliceStable(names, func(i, j int) bool { return collate(names[i]) < collate(names[j]) })
	if azure := block(names); azure != plain {
		return []string{plain, azure}
	}
	return []string{plain}
}

// collate is a header name with '-' removed: the first level of Azure's header collation.
func collate(s string) string { return strings.ReplaceAll(s, "-", "") }

// fullResource is Shared Key's canonicalized resource: /account/path, then each query
// parameter (lower-cased name, sorted, values sorted and joined by ',') on its own line.
func fullResource(r *http.Request, account string) string {
	var b strings.Builder
	b.WriteString("/" + account + escapedPath(r))
	q, _ := url.ParseQuery(r.URL.RawQuery)
	names := make([]string, 0, len(q))
	lower := map[string][]string{}
	for k, v := range q {
		lk := strings.ToLower(k)
		if _, ok := lower[lk]; !ok {
			names = append(names, lk)
		}
		lower[lk] = append(lower[lk], v...)
	}
	sort.Strings(names)
	for _, n := range names {
		v := lower[n]
		sort.Strings(v)
		b.WriteString("\n" + n + ":" + strings.Join(v, ","))
	}
	return b.String()
}

// compResource is Shared Key Lite's (and tables') canonicalized resource: /account/path and
// only the comp parameter.
func compResource(r *http.Request, account string) string {
	s := "/" + account + escapedPath(r)
	if c, ok := r.URL.Query()["comp"]; ok && len(c) > 0 {
		s += "?comp=" + c[0]
	}
	return s
}

func escapedPath(r *http.Request) string {
	p := r.URL.EscapedPath()
	if p == "" {
		return "/"
	}
	return p
}

// checkSharedKey reports whether the Authorization header (SCHEME ACCOUNT:SIGNATURE) is valid
// for r under one of keys.
func checkSharedKey(r *http.Request, service, account, header string, keys [][]byte) bool {
	scheme, rest, ok := strings.Cut(header, " ")
	if !ok || (scheme != "SharedKey" && scheme != "SharedKeyLite") {
		return false
	}
	name, sig, ok := strings.Cut(strings.TrimSpace(rest), ":")
	if !ok || name != account {
		return false
	}
	for _, s := range sharedKeyStrings(r, service, scheme, account) {
		for _, k := range keys {
			if hmac.Equal([]byte(sign(k, s)), []byte(sig)) {
				return true
			}
		}
	}
	return false
}
