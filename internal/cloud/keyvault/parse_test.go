package keyvault

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/store"
)

func TestParseRoute(t *testing.T) {
	const v = "api-version=2026-04-01"
	ver := strings.Repeat("ab", 16)
	for _, tc := range []struct {
		method, path, query string
		want                route
		status              int
	}{
		{"PUT", "/secrets/db-password", v, route{op: opSet, name: "db-password"}, 0},
		{"GET", "/secrets/db-password/", v, route{op: opGet, name: "db-password"}, 0},
		{"GET", "/secrets/db-password", v, route{op: opGet, name: "db-password"}, 0},
		{"GET", "/secrets/db-password/" + strings.ToUpper(ver), v, route{op: opGet, name: "db-password", version: ver}, 0},
		{"PATCH", "/secrets/x/" + ver, v, route{op: opUpdate, name: "x", version: ver}, 0},
		{"PATCH", "/secrets/x/", v, route{op: opUpdate, name: "x"}, 0},
		{"GET", "/secrets", v, route{op: opList, maxResults: 25}, 0},
		{"GET", "/secrets/", v + "&maxresults=3&$skiptoken=YQ", route{op: opList, maxResults: 3, skipToken: "YQ"}, 0},
		{"GET", "/secrets/x/versions", v, route{op: opListVersions, name: "x", maxResults: 25}, 0},
		{"DELETE", "/secrets/x", v, route{op: opDelete, name: "x"}, 0},
		{"GET", "/deletedsecrets", v, route{op: opListDeleted, maxResults: 25}, 0},
		{"GET", "/deletedsecrets/x", v, route{op: opGetDeleted, name: "x"}, 0},
		{"DELETE", "/deletedsecrets/x", v, route{op: opPurge, name: "x"}, 0},
		{"POST", "/deletedsecrets/x/recover", v, route{op: opRecover, name: "x"}, 0},
		{"POST", "/secrets/x/backup", v, route{op: opBackup, name: "x"}, 0},
		{"POST", "/secrets/restore", v, route{op: opRestore}, 0},
		{"PUT", "/secrets/restore", v, route{op: opSet, name: "restore"}, 0},
		{"GET", "/secrets/x", "api-version=7.4", route{op: opGet, name: "x"}, 0},
		{"GET", "/secrets/x", "api-version=7.6-preview.2", route{op: opGet, name: "x"}, 0},
		{"GET", "/secrets/x", "api-version=2025-07-01", route{op: opGet, name: "x"}, 0},
		// Bad input.
		{"GET", "/secrets/x", "", route{}, 400},
		{"GET", "/secrets/x", "api-version=6.0", route{}, 400},
		{"GET", "/secrets/x", "api-version=2016-10-01", route{}, 400},
		{"PUT", "/secrets/bad_name", v, route{}, 400},
		{"PUT", "/secrets/" + strings.Repeat("a", 128), v, route{}, 400},
		{"PUT", "/secrets/a%2Fb", v, route{}, 400},
		{"GET", "/secrets/x/not-a-version", v, route{}, 400},
		{"GET", "/secrets/x/" + ver + "0", v, route{}, 400},
		{"GET", "/secrets", v + "&maxresults=26", route{}, 400},
		{"GET", "/secrets", v + "&maxresults=zero", route{}, 400},
		{"POST", "/secrets/x", v, route{}, 405},
		// Keys and certificates.
		{"GET", "/keys/x", v, route{kind: kindKey, op: opKeyGet, name: "x"}, 0},
		{"PUT", "/keys/x", v, route{kind: kindKey, op: opKeyImport, name: "x"}, 0},
		{"POST", "/keys/x/create", v, route{kind: kindKey, op: opKeyCreate, name: "x"}, 0},
		{"POST", "/keys/x//sign", v, route{kind: kindKey, op: opKeySign, name: "x"}, 0},
		{"POST", "/keys/x/sign", v, route{kind: kindKey, op: opKeySign, name: "x"}, 0},
		{"POST", "/keys/x/" + ver + "/unwrapkey", v, route{kind: kindKey, op: opKeyUnwrap, name: "x", version: ver}, 0},
		{"PUT", "/keys/x/rotationpolicy", v, route{kind: kindKey, op: opKeySetPolicy, name: "x"}, 0},
		{"POST", "/keys/restore", v, route{kind: kindKey, op: opKeyRestore}, 0},
		{"GET", "/deletedkeys", v, route{kind: kindKey, op: opKeyListDeleted, maxResults: 25}, 0},
		{"POST", "/deletedkeys/x/recover", v, route{kind: kindKey, op: opKeyRecover, name: "x"}, 0},
		{"POST", "/certificates/c/pending/merge", v, route{kind: kindCert, op: opCertMerge, name: "c"}, 0},
		{"PATCH", "/certificates/c/policy", v, route{kind: kindCert, op: opCertUpdatePolicy, name: "c"}, 0},
		{"GET", "/certificates/c/", v, route{kind: kindCert, op: opCertGet, name: "c"}, 0},
		{"GET", "/deletedcertificates", v, route{kind: kindCert, op: opCertListDeleted, maxResults: 25}, 0},
		{"GET", "/keys/x/" + ver + "/sign", v, route{}, 405},
		{"PUT", "/certificates/c", v, route{}, 405},
		{"POST", "/keys/bad_name/create", v, route{}, 400},
		{"POST", "/keys/x/nothex/sign", v, route{}, 400},
		{"GET", "/keys/x/y/z/w", v, route{}, 404},
		{"POST", "/deletedkeys/x/y", v, route{}, 404},
		{"GET", "/secrets/x/y/z", v, route{}, 404},
	} {
		got, err := parseRoute(tc.method, tc.path, tc.query)
		if tc.status != 0 {
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status {
				t.Errorf("%s %s?%s: err = %v, want status %d", tc.method, tc.path, tc.query, err, tc.status)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s?%s: %v", tc.method, tc.path, tc.query, err)
			continue
		}
		got.apiVersion = ""
		if got != tc.want {
			t.Errorf("%s %s?%s = %+v, want %+v", tc.method, tc.path, tc.query, got, tc.want)
		}
	}
}

func TestParseBodies(t *testing.T) {
	big := strings.Repeat("x", maxValueBytes+1)
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"value":"s3cret"}`, true},
		{`{"value":"","contentType":"text/plain","attributes":{"enabled":false,"nbf":1,"exp":2},"tags":{"a":"b"}}`, true},
		{`{"value":"v","unknown":1}`, true},
		{`{}`, false},
		{`{"value":null}`, false},
		{`{"value":1}`, false},
		{`[]`, false},
		{`{"value":"v"} {}`, false},
		{`{"value":"` + big + `"}`, false},
		{`{"value":"v","attributes":{"nbf":5,"exp":5}}`, false},
		{`{"value":"v","attributes":{"exp":-1}}`, false},
		{`{"value":"v","contentType":"` + strings.Repeat("c", 256) + `"}`, false},
		{`{"value":"v","tags":{"":"x"}}`, false},
		{`{"value":"v","tags":{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":"","10":"","11":"","12":"","13":"","14":"","15":"","16":""}}`, false},
	} {
		_, err := parseSetBody([]byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("parseSetBody(%.60s) err = %v, want ok=%v", tc.body, err, tc.ok)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Status != http.StatusBadRequest || strings.Contains(e.Message, "s3cret")) {
			t.Errorf("parseSetBody(%.60s) err = %v, want a 400 without the value", tc.body, err)
		}
	}
	if _, err := parseRestoreBody([]byte(`{"value":"***"}`)); err == nil {
		t.Error("restore accepted a value that is not base64url")
	}
}

// FuzzParseRoute checks that any request line is either rejected with a Key Vault error or
// parsed into a valid route.
func FuzzParseRoute(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/secrets/a/", "api-version=7.5"},
		{"PUT", "/secrets/a", "api-version=2026-04-01"},
		{"GET", "/secrets/a/0123456789abcdef0123456789ABCDEF", "api-version=7.0"},
		{"GET", "/secrets", "api-version=7.4&maxresults=2&$skiptoken=Yg"},
		{"POST", "/deletedsecrets/a/recover", "api-version=7.4"},
		{"DELETE", "//secrets//", "api-version=%zz"},
		{"PATCH", "/secrets/a%2F..%2Fb/x", "api-version=7.4;x"},
		{"POST", "/keys/a//sign", "api-version=7.5"},
		{"POST", "/certificates/a/pending/merge", "api-version=7.5"},
		{"GET", "/deletedkeys", "api-version=7.5&maxresults=3"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, path, query string) {
		rt, err := parseRoute(method, path, query)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
				t.Fatalf("err = %v, want a Key Vault 4xx", err)
			}
			return
		}
		if rt.op == 0 || rt.apiVersion == "" {
			t.Fatalf("route %+v incomplete", rt)
		}
		if rt.name != "" && !secretName.MatchString(rt.name) || rt.version != "" && !secretVersion.MatchString(rt.version) {
			t.Fatalf("route %+v has an invalid name or version", rt)
		}
		if isList(rt.op) && (rt.maxResults < 1 || rt.maxResults > maxPage) {
			t.Fatalf("route %+v has a bad page size", rt)
		}
	})
}

// FuzzParseBodies checks that the body parsers accept only bounded, valid input.
func FuzzParseBodies(f *testing.F) {
	for _, s := range []string{
		`{"value":"v"}`, `{"value":"v","contentType":"c","attributes":{"enabled":true,"nbf":1,"exp":2},"tags":{"k":"v"}}`,
		`{"attributes":{"exp":9999999999999}}`, `{"value":"AQID"}`, `{"value":"\ud800"}`, `nul`, `{"tags":{"a":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if b, err := parseSetBody(body); err == nil {
			if b.Value == nil || len(*b.Value) > maxValueBytes || len(b.Tags) > maxTags {
				t.Fatalf("accepted an out-of-bounds set body")
			}
		} else if e := (*Error)(nil); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
			t.Fatalf("set: err = %v, want 400", err)
		}
		if b, err := parseUpdateBody(body); err == nil {
			if a := b.Attributes; a != nil && a.NotBefore != nil && a.Expires != nil && *a.Expires <= *a.NotBefore {
				t.Fatalf("accepted exp <= nbf")
			}
		}
		if blob, err := parseRestoreBody(body); err == nil && len(blob) > maxBackupBlobBytes+3 {
			t.Fatalf("accepted a %d-byte backup", len(blob))
		}
	})
}

// FuzzUnseal checks that restore accepts only blobs this cloud sealed, whatever the bytes.
func FuzzUnseal(f *testing.F) {
	st, err := store.Open(f.Context(), filepath.Join(f.TempDir(), "state.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	sl, err := newSealer(f.Context(), st)
	if err != nil {
		f.Fatal(err)
	}
	good, err := sl.seal(backupOf{Name: "n", Latest: strings.Repeat("a", 32), Versions: []version{{ID: strings.Repeat("a", 32), Value: "v"}}})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := sl.unseal(good); err != nil {
		f.Fatalf("unseal of a sealed backup: %v", err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{backupFormat})
	f.Add(append([]byte{backupFormat}, make([]byte, 40)...))
	f.Fuzz(func(t *testing.T, blob []byte) {
		b, err := sl.unseal(blob)
		if err != nil {
			if e := (*Error)(nil); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
				t.Fatalf("err = %v, want 400", err)
			}
			return
		}
		if !secretName.MatchString(b.Name) || len(b.Versions) == 0 {
			t.Fatalf("accepted an invalid backup %+v", b)
		}
	})
}
