package storage

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzAuthorize feeds untrusted request lines, Authorization headers and SAS queries to the
// parts of the front that read them: none may panic, and nothing unsigned is accepted.
func FuzzAuthorize(f *testing.F) {
	f.Add("GET", "/c/b?sv=2020-08-04&ss=b&srt=sco&sp=r&se=2030-01-01T00:00:00Z&sig=AAAA", "SharedKey acct:AAAA", "blob")
	f.Add("POST", "/Tables('t')?tn=t&sv=2019-02-02&sp=r&se=2030-01-01&sig=x", "SharedKeyLite acct:", "table")
	f.Add("DELETE", "/q/messages/1?popreceipt=x", "Bearer x", "queue")
	f.Add("PUT", "/%zz", "SharedKey :", "blob")
	key := [][]byte{[]byte("0123456789abcdef0123456789abcdef")}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, method, target, auth, service string) {
		if service != "blob" && service != "queue" && service != "table" {
			service = "blob"
		}
		u, err := url.ParseRequestURI("https://acct.blob.core.windows.net" + target)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{"Authorization": {auth}, "X-Ms-Date": {"x"}}}
		o := classify(r, service)
		if checkSharedKey(r, service, "acct", auth, key) {
			t.Fatalf("accepted an unsigned Shared Key %q", auth)
		}
		if checkSAS(u.Query(), service, "acct", o, key, now) == nil {
			t.Fatalf("accepted an unsigned SAS %q", u.RawQuery)
		}
	})
}
