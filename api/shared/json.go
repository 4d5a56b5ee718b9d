package shared

import "encoding/json"

// JSON is a free-form JSON value kept as is (Azure Service Operator fields Cerulean passes to
// ARM without interpreting them).
// +kubebuilder:validation:Type=object
// +kubebuilder:pruning:PreserveUnknownFields
type JSON struct {
	Raw json.RawMessage `json:"-"`
}

// MarshalJSON writes the raw value.
func (j JSON) MarshalJSON() ([]byte, error) {
	if len(j.Raw) == 0 {
		return []byte("null"), nil
	}
	return j.Raw, nil
}

// UnmarshalJSON keeps the raw value.
func (j *JSON) UnmarshalJSON(b []byte) error {
	j.Raw = append(j.Raw[:0], b...)
	return nil
}
