package resources

import (
	"strings"
	"testing"
)

func TestValidGroupName(t *testing.T) {
	for name, want := range map[string]bool{
		"rg": true, "My_RG-(1).x": true, "grüppe": true, strings.Repeat("a", 90): true,
		"": false, "ends.": false, "a b": false, "a/b": false, "a,b": false, strings.Repeat("a", 91): false,
	} {
		if got := ValidGroupName(name); got != want {
			t.Errorf("ValidGroupName(%q) = %v", name, got)
		}
	}
}
