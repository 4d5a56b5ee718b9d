package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Manifest is one object to apply, with the comments written above it.
type Manifest struct {
	Object   map[string]any
	Comments []string
}

// FileName is the manifest's file under --output: KIND-NAME.yaml, lower case.
func (m Manifest) FileName() string {
	meta, _ := m.Object["metadata"].(map[string]any)
	return strings.ToLower(fmt.Sprint(m.Object["kind"])) + "-" + fmt.Sprint(meta["name"]) + ".yaml"
}

// YAML is the manifest as one YAML document: apiVersion, kind, metadata, spec in that order,
// the comments first.
func (m Manifest) YAML() ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range []string{"apiVersion", "kind", "metadata", "spec"} {
		v, ok := m.Object[k]
		if !ok {
			continue
		}
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			return nil, fmt.Errorf("encode %s: %w", k, err)
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &n)
	}
	if len(m.Comments) > 0 {
		doc.HeadComment = strings.Join(m.Comments, "\n")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode manifest: %w", err)
	}
	return buf.Bytes(), nil
}

// Write writes the manifests to w as one multi-document YAML stream.
func Write(w io.Writer, ms []Manifest) error {
	docs, err := render(ms)
	if err != nil {
		return err
	}
	for i, d := range docs {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(d); err != nil {
			return err
		}
	}
	return nil
}

// WriteDir writes one file per manifest into dir (created if missing). All or nothing: each
// file goes to a temporary name first, and only when all are written are they renamed; on any
// failure the temporary files are removed and no file of this import is left.
func WriteDir(dir string, ms []Manifest) (err error) {
	docs, err := render(ms)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	names := map[string]bool{}
	var tmps []string
	defer func() {
		if err != nil {
			for _, t := range tmps {
				_ = os.Remove(t)
			}
		}
	}()
	for i, m := range ms {
		name := m.FileName()
		if names[name] {
			return fmt.Errorf("write %s: two manifests share the file name %s", dir, name)
		}
		names[name] = true
		f, err := os.CreateTemp(dir, "."+name+".*")
		if err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
		tmps = append(tmps, f.Name())
		_, werr := f.Write(docs[i])
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, name), werr)
		}
	}
	var errs []error
	for i, m := range ms {
		if err := os.Rename(tmps[i], filepath.Join(dir, m.FileName())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func render(ms []Manifest) ([][]byte, error) {
	out := make([][]byte, 0, len(ms))
	for _, m := range ms {
		b, err := m.YAML()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}
