package arm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// Decode reads the request body (at most the configured cap) and decodes it as one JSON object
// into v. Unknown fields are ignored, as ARM ignores them; a wrong type, a syntax error, an
// empty body, anything after the object or a body over the cap is 400. Handlers decode before
// they write, so a bad body writes nothing.
func (r *Request) Decode(v any) error {
	body, err := r.body()
	if err != nil {
		return err
	}
	return DecodeJSON(body, v)
}

// DecodeJSON is Decode's parser, separate so it can be fuzzed.
func DecodeJSON(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return Errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was empty; a JSON object is required.")
	}
	if trimmed[0] != '{' {
		return ErrInvalidContent("a JSON object is required.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return ErrInvalidContent("the value at '%s' must be of type %s.", clip(te.Field, 128), te.Type.String())
		}
		return ErrInvalidContent("the content is not valid JSON.")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrInvalidContent("unexpected content after the JSON object.")
	}
	return nil
}
