package csiprovider

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseObjects(t *testing.T) {
	in := `array:
  - |
    objectName: db-password
    objectType: secret
    objectAlias: DB_PASSWORD
    objectEncoding: base64
    filePermission: "0600"
  - |
    objectName:  api-key 
    objectVersion: 0123456789abcdef0123456789ABCDEF
  - |
    objectName: history
    objectType: SECRET
    objectVersionHistory: 3
    objectFormat: PEM
`
	objs, err := ParseObjects(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 3 {
		t.Fatalf("got %d objects", len(objs))
	}
	o := objs[0]
	if o.FileName() != "DB_PASSWORD" || o.UID() != "secret/db-password" || o.ObjectEncoding != "base64" {
		t.Errorf("first object %+v", o)
	}
	if m, _ := o.Mode(0o644); m != 0o600 {
		t.Errorf("mode %o, want 0600", m)
	}
	if objs[1].ObjectName != "api-key" || objs[1].ObjectType != TypeSecret || objs[1].FileName() != "api-key" {
		t.Errorf("second object %+v (name trimmed, type defaulted)", objs[1])
	}
	if m, _ := objs[1].Mode(0o644); m != 0o644 {
		t.Errorf("default mode %o", m)
	}
	if objs[2].ObjectType != TypeSecret || objs[2].ObjectVersionHistory != 3 || objs[2].ObjectFormat != FormatPEM {
		t.Errorf("third object %+v", objs[2])
	}
}

func TestParseObjectsErrors(t *testing.T) {
	item := func(body string) string {
		return "array:\n  - |\n    " + strings.ReplaceAll(body, "\n", "\n    ") + "\n"
	}
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "objects is not set"},
		{"no array", "foo: bar", "objects array is empty"},
		{"not yaml", "array: [", "not YAML"},
		{"no name", item("objectType: secret"), "objectName is not set"},
		{"bad type", item("objectName: a\nobjectType: blob"), `objectType "blob"`},
		{"bad encoding", item("objectName: a\nobjectEncoding: rot13"), `objectEncoding "rot13"`},
		{"encoding on key", item("objectName: a\nobjectType: key\nobjectEncoding: hex"), "only for objectType secret"},
		{"bad format", item("objectName: a\nobjectFormat: der"), `objectFormat "der"`},
		{"bad version", item("objectName: a\nobjectVersion: latest"), "32 hexadecimal"},
		{"bad permission", item("objectName: a\nfilePermission: rw-r--r--"), "filePermission"},
		{"permission too wide", item("objectName: a\nfilePermission: \"7777\""), "filePermission"},
		{"traversal alias", item("objectName: a\nobjectAlias: ../etc/passwd"), "path separator"},
		{"dot alias", item("objectName: a\nobjectAlias: .."), "not allowed"},
		{"history and version", item("objectName: a\nobjectVersionHistory: 2\nobjectVersion: 0123456789abcdef0123456789abcdef"), "cannot both"},
		{"negative history", item("objectName: a\nobjectVersionHistory: -1"), "between 0"},
		{"bad name", item("objectName: a_b"), "letters, digits and hyphens"},
		{"duplicate file", "array:\n  - |\n    objectName: a\n  - |\n    objectName: b\n    objectAlias: a\n", "same file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseObjects(tc.in)
			if err == nil || !errors.Is(err, ErrInvalidObjects) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidObjects with %q", err, tc.want)
			}
		})
	}
}

// TestParseObjectsErrorHidesValues: a YAML error does not repeat the text of the item, which may
// be a value pasted by mistake.
func TestParseObjectsErrorHidesValues(t *testing.T) {
	_, err := ParseObjects("array:\n  - |\n    objectName: [hunter2-secret-value\n")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("got %v", err)
	}
}

func FuzzParseObjects(f *testing.F) {
	f.Add("array:\n  - |\n    objectName: a\n    objectAlias: b\n    filePermission: \"0640\"\n")
	f.Add("array:\n  - |\n    objectName: a\n    objectVersionHistory: 5\n")
	f.Add("array: [\"objectName: x\", \"objectName: y\\nobjectType: cert\"]")
	f.Add("array:\n  - objectName: a\n")
	f.Fuzz(func(t *testing.T, s string) {
		objs, err := ParseObjects(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidObjects) {
				t.Fatalf("error %v is not ErrInvalidObjects", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, o := range objs {
			name := o.FileName()
			if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || seen[name] {
				t.Fatalf("accepted file name %q", name)
			}
			seen[name] = true
			if m, err := o.Mode(0o644); err != nil || m&^os.ModePerm != 0 {
				t.Fatalf("mode %v %v", m, err)
			}
			if o.ObjectType != TypeSecret && o.ObjectType != TypeKey && o.ObjectType != TypeCert {
				t.Fatalf("type %q", o.ObjectType)
			}
		}
	})
}
