package engines

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestRangeToPrefixes(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		start, end string
		want       string
	}{
		{"127.0.0.1", "127.0.0.1", "[127.0.0.1/32]"},
		{"10.0.0.0", "10.0.0.255", "[10.0.0.0/24]"},
		{"10.0.0.1", "10.0.0.9", "[10.0.0.1/32 10.0.0.2/31 10.0.0.4/30 10.0.0.8/31]"},
		{"0.0.0.0", "255.255.255.255", "[0.0.0.0/0]"},
		{"10.0.0.9", "10.0.0.1", "[]"},
	} {
		got := fmt.Sprint(rangeToPrefixes(a(tc.start), a(tc.end)))
		if got != tc.want {
			t.Errorf("%s-%s: %s, want %s", tc.start, tc.end, got, tc.want)
		}
	}
}
