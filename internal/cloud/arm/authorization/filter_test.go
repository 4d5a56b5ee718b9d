package authorization

import "testing"

func TestParseAssignmentFilter(t *testing.T) {
	const id = "2548fc51-40fc-4f70-894b-94056c8c37fb"
	for _, tc := range []struct {
		q       string
		atScope bool
		pid     string
		ok      bool
	}{
		{"", false, "", true},
		{"atScope()", true, "", true},
		{"principalId eq '" + id + "'", false, id, true},
		{"atScope() and principalId eq '" + id + "'", true, id, true},
		{"assignedTo('" + id + "')", false, id, true},
		{"PrincipalId EQ '" + id + "'", false, id, true},
		{"principalId eq 'x'", false, "", false},
		{"name eq 'x'", false, "", false},
		{"atScope() or true", false, "", false},
	} {
		f, err := ParseAssignmentFilter(tc.q)
		if tc.ok != (err == nil) || tc.ok && (f.AtScope != tc.atScope || f.PrincipalID != tc.pid) {
			t.Errorf("ParseAssignmentFilter(%q) = %+v, %v", tc.q, f, err)
		}
	}
}

func FuzzParseAssignmentFilter(f *testing.F) {
	f.Add("atScope() and principalId eq '2548fc51-40fc-4f70-894b-94056c8c37fb'")
	f.Add("assignedTo('x')")
	f.Fuzz(func(_ *testing.T, q string) { _, _ = ParseAssignmentFilter(q) })
}
