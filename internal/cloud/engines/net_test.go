package engines

import (
	"net/netip"
	"testing"
)

// TestBlock: the /24 of a data dir is inside the network asked for (127.0.0.0/8 clear of
// 127.0.0.x by default), stable for one dir, and a bad network is a clear error.
func TestBlock(t *testing.T) {
	for _, tc := range []struct {
		net  string
		want string // the prefix the /24 must be in; "" for an error
	}{
		{"", "127.0.0.0/8"},
		{"10.245.0.0/16", "10.245.0.0/16"},
		{"10.245.7.0/24", "10.245.7.0/24"},
		{"10.245.7.9/16", "10.245.0.0/16"},
		{"10.0.0.0/25", ""},
		{"fd00::/64", ""},
	} {
		var n netip.Prefix
		if tc.net != "" {
			n = netip.MustParsePrefix(tc.net)
		}
		for _, dir := range []string{"/a", "/b/c", "/tmp/TestX123/001"} {
			b, err := block(n, dir)
			if tc.want == "" {
				if err == nil {
					t.Errorf("block(%s): %s, want an error", tc.net, b)
				}
				continue
			}
			if err != nil {
				t.Fatalf("block(%s, %s): %v", tc.net, dir, err)
			}
			again, _ := block(n, dir)
			in := netip.MustParsePrefix(tc.want)
			if b.Bits() != 24 || !in.Contains(b.Addr()) || b != again || b.Addr() != b.Masked().Addr() {
				t.Errorf("block(%s, %s) = %s (again %s), want a stable /24 in %s", tc.net, dir, b, again, tc.want)
			}
			if tc.net == "" && b.Addr().As4()[1] == 0 {
				t.Errorf("block(%s) = %s, in 127.0.0.x", dir, b)
			}
		}
	}
}
