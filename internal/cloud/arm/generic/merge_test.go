package generic

import (
	"encoding/json"
	"testing"
)

func TestMergeBody(t *testing.T) {
	for _, tc := range []struct{ name, cur, patch, want string }{
		{"adds", `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
		{"replaces a value", `{"a":1}`, `{"a":"x"}`, `{"a":"x"}`},
		{"merges objects", `{"p":{"a":1,"b":{"c":1}}}`, `{"p":{"b":{"d":2}}}`, `{"p":{"a":1,"b":{"c":1,"d":2}}}`},
		{"null removes", `{"p":{"a":1,"b":2}}`, `{"p":{"a":null}}`, `{"p":{"b":2}}`},
		{"an array replaces", `{"a":[1,2]}`, `{"a":[3]}`, `{"a":[3]}`},
		{"an object replaces a scalar", `{"a":1}`, `{"a":{"b":1}}`, `{"a":{"b":1}}`},
		{"large numbers keep their digits", `{}`, `{"n":12345678901234567890}`, `{"n":12345678901234567890}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cur, patch map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tc.cur), &cur); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.patch), &patch); err != nil {
				t.Fatal(err)
			}
			got, err := mergeBody(cur, patch)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(got)
			if string(b) != tc.want {
				t.Errorf("got %s, want %s", b, tc.want)
			}
		})
	}
}

// FuzzBody: any JSON object a client sends is stored and merged without a panic, and what is
// stored is JSON again.
func FuzzBody(f *testing.F) {
	f.Add([]byte(`{"location":"x","properties":{"a":{"b":null}},"sku":{"name":"S"}}`), []byte(`{"properties":{"a":1}}`))
	f.Add([]byte(`{"properties":null}`), []byte(`{"properties":[]}`))
	k := &kinds[0]
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var in, patch map[string]json.RawMessage
		if json.Unmarshal(a, &in) != nil || json.Unmarshal(b, &patch) != nil {
			return
		}
		stored, err := bodyOf(k, in)
		if err != nil {
			return
		}
		merged, err := mergeBody(stored, patch)
		if err != nil {
			return
		}
		out, err := json.Marshal(merged)
		if err != nil || !json.Valid(out) {
			t.Fatalf("merged body is not JSON: %v %q", err, out)
		}
	})
}
