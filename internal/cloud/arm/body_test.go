package arm

import (
	"errors"
	"net/http"
	"testing"
)

type sample struct {
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags"`
	Properties struct {
		Issuer    string   `json:"issuer"`
		Audiences []string `json:"audiences"`
		Enabled   bool     `json:"enabled"`
		Count     int      `json:"count"`
	} `json:"properties"`
}

func TestDecodeJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"location":"eastus","unknown":1}`, true},
		{` {"properties":{"audiences":["a"],"count":2}} `, true},
		{``, false},
		{`   `, false},
		{`null`, false},
		{`[]`, false},
		{`"x"`, false},
		{`{"location":`, false},
		{`{"location":1}`, false},
		{`{"tags":{"a":1}}`, false},
		{`{"properties":{"audiences":"a"}}`, false},
		{`{"properties":{"count":"2"}}`, false},
		{`{"properties":{"count":1e400}}`, false},
		{`{} {}`, false},
		{`{}x`, false},
	} {
		var v sample
		err := DecodeJSON([]byte(tc.body), &v)
		if tc.ok != (err == nil) {
			t.Errorf("DecodeJSON(%q) = %v", tc.body, err)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != "InvalidRequestContent") {
			t.Errorf("DecodeJSON(%q) error = %#v, want 400 InvalidRequestContent", tc.body, err)
		}
	}
}

// FuzzDecodeJSON: any body decodes or is a 400 InvalidRequestContent; never a panic or
// another error.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"location":"eastus","tags":{"a":"b"},"properties":{"issuer":"https://x","audiences":["a"]}}`,
		`{"location":1}`, `[]`, `{"a":{"b":{"c":[1,2,{"d":null}]}}}`, "{\"location\":\"\\ud800\"}", `{} 1`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v sample
		err := DecodeJSON(body, &v)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Message == "" {
			t.Fatalf("DecodeJSON(%q) = %#v", body, err)
		}
	})
}
