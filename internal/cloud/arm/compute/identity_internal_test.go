package compute

import (
	"encoding/json"
	"testing"
)

func TestParseType(t *testing.T) {
	for _, tc := range []struct {
		in           string
		system, user bool
		ok           bool
	}{
		{"SystemAssigned", true, false, true},
		{"userassigned", false, true, true},
		{"SystemAssigned, UserAssigned", true, true, true},
		{"SystemAssigned,UserAssigned", true, true, true},
		{"None", false, false, true},
		{"None, SystemAssigned", false, false, false},
		{"", false, false, false},
		{"Magic", false, false, false},
	} {
		s, u, err := parseType(tc.in)
		if (err == nil) != tc.ok || (tc.ok && (s != tc.system || u != tc.user)) {
			t.Errorf("parseType(%q) = %v, %v, %v", tc.in, s, u, err)
		}
	}
}

func TestTypeName(t *testing.T) {
	for want, i := range map[string]*identity{
		"None":                         nil,
		"SystemAssigned":               {System: true},
		"UserAssigned":                 {UserAssigned: []userAssigned{{ID: "x"}}},
		"SystemAssigned, UserAssigned": {System: true, UserAssigned: []userAssigned{{ID: "x"}}},
	} {
		if got := i.typeName(); got != want {
			t.Errorf("typeName = %q, want %q", got, want)
		}
	}
}

func TestWithoutSecrets(t *testing.T) {
	in := `{"osProfile":{"adminUsername":"u","adminPassword":"p","customData":"c"},"userData":"d",
		"virtualMachineProfile":{"osProfile":{"adminPassword":"p"},"userData":"d"},"hardwareProfile":{"vmSize":"B1s"}}`
	out, err := withoutSecrets(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"hardwareProfile":{"vmSize":"B1s"},"osProfile":{"adminUsername":"u"},"virtualMachineProfile":{"osProfile":{}}}`
	if string(out) != want {
		t.Fatalf("got %s, want %s", out, want)
	}
	if out, err := withoutSecrets(json.RawMessage(`null`)); err != nil || out != nil {
		t.Fatalf("null: %s %v", out, err)
	}
	if _, err := withoutSecrets(json.RawMessage(`[1]`)); err == nil {
		t.Fatal("an array was accepted as properties")
	}
}

func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ doc, patch, want string }{
		{`{"a":1,"b":{"c":2,"d":3}}`, `{"b":{"c":null,"e":4}}`, `{"a":1,"b":{"d":3,"e":4}}`},
		{``, `{"a":1}`, `{"a":1}`},
		{`{"a":{"b":1}}`, `{"a":2}`, `{"a":2}`},
	} {
		got, err := mergePatch(json.RawMessage(tc.doc), json.RawMessage(tc.patch))
		if err != nil || string(got) != tc.want {
			t.Errorf("mergePatch(%s, %s) = %s, %v; want %s", tc.doc, tc.patch, got, err, tc.want)
		}
	}
}
