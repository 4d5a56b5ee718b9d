package csiprovider

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Object types, formats and encodings of the objects parameter, with the upstream Azure
// provider's spelling.
const (
	TypeSecret = "secret"
	TypeKey    = "key"
	TypeCert   = "cert"

	FormatPEM = "pem"
	FormatPFX = "pfx"

	EncodingUTF8   = "utf-8"
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// maxVersionHistory bounds objectVersionHistory: every version is a Key Vault GET.
const maxVersionHistory = 100

// ErrInvalidObjects reports an objects parameter that cannot be used; nothing is fetched.
var ErrInvalidObjects = errors.New("invalid objects")

// Object is one item of the objects parameter.
type Object struct {
	// ObjectName is the name of the object in Key Vault.
	ObjectName string `json:"objectName"`
	// ObjectAlias is the file name; ObjectName when empty.
	ObjectAlias string `json:"objectAlias"`
	// ObjectType is secret (default), key or cert.
	ObjectType string `json:"objectType"`
	// ObjectVersion pins a version; empty means the latest.
	ObjectVersion string `json:"objectVersion"`
	// ObjectVersionHistory > 1 writes that many versions, newest first, as files 0, 1, ... in a
	// directory named by the alias.
	ObjectVersionHistory int32 `json:"objectVersionHistory"`
	// ObjectFormat (pem | pfx) applies to certificates.
	ObjectFormat string `json:"objectFormat"`
	// ObjectEncoding (utf-8 | hex | base64) is how a secret's value is decoded before it is
	// written.
	ObjectEncoding string `json:"objectEncoding"`
	// FilePermission is an octal file mode ("0600"); the driver's permission when empty.
	FilePermission string `json:"filePermission"`
}

// FileName is the file (or, with a version history, the directory) the object is written to.
func (o Object) FileName() string {
	if o.ObjectAlias != "" {
		return o.ObjectAlias
	}
	return o.ObjectName
}

// UID is the object's id in the mount response's object versions: TYPE/NAME, as upstream.
func (o Object) UID() string { return o.ObjectType + "/" + o.ObjectName }

// String names the object in errors: never a value.
func (o Object) String() string {
	s := fmt.Sprintf("%s %q", o.ObjectType, o.ObjectName)
	if o.ObjectVersion != "" {
		s += fmt.Sprintf(" version %q", o.ObjectVersion)
	}
	return s
}

// Mode is the object's file mode: filePermission when set, else def.
func (o Object) Mode(def os.FileMode) (os.FileMode, error) {
	if o.FilePermission == "" {
		return def, nil
	}
	m, err := strconv.ParseUint(o.FilePermission, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("%w: %s: filePermission %q is not an octal mode such as 0644", ErrInvalidObjects, o, o.FilePermission)
	}
	return os.FileMode(m), nil
}

// ParseObjects parses the objects parameter: YAML with a key array whose items are each a YAML
// document describing one object, as the upstream provider reads it:
//
//	array:
//	  - |
//	    objectName: db-password
//	    objectType: secret
//
// Fields are trimmed of spaces and type, format and encoding compared without case. An error
// names the item and never repeats a value from it.
func ParseObjects(s string) ([]Object, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: objects is not set", ErrInvalidObjects)
	}
	var list struct {
		Array []string `json:"array"`
	}
	if err := yaml.Unmarshal([]byte(s), &list); err != nil {
		return nil, fmt.Errorf("%w: objects is not YAML with an array of strings: %w", ErrInvalidObjects, stripValues(err))
	}
	if len(list.Array) == 0 {
		return nil, fmt.Errorf("%w: objects array is empty", ErrInvalidObjects)
	}
	objs := make([]Object, 0, len(list.Array))
	files := map[string]int{}
	for i, item := range list.Array {
		var o Object
		if err := yaml.Unmarshal([]byte(item), &o); err != nil {
			return nil, fmt.Errorf("%w: objects item %d: %w", ErrInvalidObjects, i, stripValues(err))
		}
		normalize(&o)
		if err := validate(o); err != nil {
			return nil, fmt.Errorf("objects item %d: %w", i, err)
		}
		if j, dup := files[o.FileName()]; dup {
			return nil, fmt.Errorf("%w: objects items %d and %d write the same file %q: set objectAlias", ErrInvalidObjects, j, i, o.FileName())
		}
		files[o.FileName()] = i
		objs = append(objs, o)
	}
	return objs, nil
}

func normalize(o *Object) {
	o.ObjectName = strings.TrimSpace(o.ObjectName)
	o.ObjectAlias = strings.TrimSpace(o.ObjectAlias)
	o.ObjectVersion = strings.TrimSpace(o.ObjectVersion)
	o.ObjectType = strings.ToLower(strings.TrimSpace(o.ObjectType))
	o.ObjectFormat = strings.ToLower(strings.TrimSpace(o.ObjectFormat))
	o.ObjectEncoding = strings.ToLower(strings.TrimSpace(o.ObjectEncoding))
	o.FilePermission = strings.TrimSpace(o.FilePermission)
	if o.ObjectType == "" {
		o.ObjectType = TypeSecret
	}
}

func validate(o Object) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidObjects, o, fmt.Sprintf(format, args...))
	}
	if o.ObjectName == "" {
		return fmt.Errorf("%w: objectName is not set", ErrInvalidObjects)
	}
	if !validObjectName(o.ObjectName) {
		return fmt.Errorf("%w: objectName %q must be 1-127 letters, digits and hyphens", ErrInvalidObjects, o.ObjectName)
	}
	switch o.ObjectType {
	case TypeSecret, TypeKey, TypeCert:
	default:
		return bad("objectType %q is not secret, key or cert", o.ObjectType)
	}
	if o.ObjectVersion != "" && !validVersion(o.ObjectVersion) {
		return bad("objectVersion is not 32 hexadecimal digits")
	}
	switch o.ObjectFormat {
	case "", FormatPEM, FormatPFX:
	default:
		return bad("objectFormat %q is not pem or pfx", o.ObjectFormat)
	}
	if o.ObjectFormat == FormatPFX && o.ObjectType != TypeSecret {
		return bad("objectFormat pfx is only for objectType secret")
	}
	switch o.ObjectEncoding {
	case "", EncodingUTF8, EncodingHex, EncodingBase64:
	default:
		return bad("objectEncoding %q is not utf-8, hex or base64", o.ObjectEncoding)
	}
	if o.ObjectEncoding != "" && o.ObjectType != TypeSecret {
		return bad("objectEncoding is only for objectType secret")
	}
	if o.ObjectVersionHistory < 0 || o.ObjectVersionHistory > maxVersionHistory {
		return bad("objectVersionHistory must be between 0 and %d", maxVersionHistory)
	}
	if o.ObjectVersionHistory > 1 && o.ObjectVersion != "" {
		return bad("objectVersionHistory and objectVersion cannot both be set")
	}
	if _, err := o.Mode(0); err != nil {
		return err
	}
	if err := validFileName(o.FileName()); err != nil {
		return bad("%v", err)
	}
	return nil
}

func validObjectName(s string) bool {
	if len(s) > 127 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validVersion(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F') {
			return false
		}
	}
	return true
}

// validFileName keeps every file inside the target path: one path element, no dot names.
func validFileName(name string) error {
	switch {
	case name == "." || name == "..":
		return fmt.Errorf("file name %q is not allowed", name)
	case strings.ContainsAny(name, `/\`+"\x00"):
		return fmt.Errorf("file name %q must not contain a path separator", name)
	case strings.HasPrefix(name, ".."):
		return fmt.Errorf("file name %q must not start with two dots", name)
	case filepath.IsAbs(name):
		return fmt.Errorf("file name %q must be relative", name)
	}
	return nil
}

// stripValues keeps a YAML error's position and kind but not the text it quotes, which could be
// part of a value the user did not mean to log.
func stripValues(err error) error {
	msg := err.Error()
	if i := strings.IndexAny(msg, "`'\""); i > 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return errors.New(msg)
}
