package arm

import (
	"strings"
	"testing"
)

func TestValidateTags(t *testing.T) {
	if err := ValidateTags(map[string]string{"env": "dev"}); err != nil {
		t.Error(err)
	}
	for _, tags := range []map[string]string{
		{"": "x"}, {"a/b": "x"}, {"k": strings.Repeat("v", 257)}, {strings.Repeat("k", 513): "v"},
	} {
		if err := ValidateTags(tags); err == nil {
			t.Errorf("ValidateTags(%v) accepted", tags)
		}
	}
}
