// Package shellenv renders values for `export NAME=VALUE` lines that a POSIX shell sources.
package shellenv

import (
	"regexp"
	"strings"
)

var safe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+,=-]+$`)

// Quote leaves plain values alone and single-quotes the rest.
func Quote(s string) string {
	if safe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
