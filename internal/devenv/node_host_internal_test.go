package devenv

import "testing"

// Mount points with spaces or tabs are escaped in mountinfo; teardown must unmount them by their
// real path.
func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/plain`:             "/tmp/plain",
		`/tmp/with\040space`:     "/tmp/with space",
		`/tmp/tab\011and\134bs`:  "/tmp/tab\tand\\bs",
		`/tmp/trailing\04`:       `/tmp/trailing\04`,
		`/tmp/not\99octal\040ok`: `/tmp/not\99octal ok`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHasPrefixPath(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a/b", true}, {"/a/b/c", "/a/b", true}, {"/a/bc", "/a/b", false}, {"/a", "/a/b", false},
	} {
		if got := hasPrefixPath(c.p, c.dir); got != c.want {
			t.Errorf("hasPrefixPath(%q, %q) = %v", c.p, c.dir, got)
		}
	}
}
