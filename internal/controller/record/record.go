// Package record is the controllers' Event recorder: it cuts every note to the length the API
// server accepts, so that a failure with a long Azure response body is still reported. The
// events.k8s.io API refuses a note over 1 kB, and the recorder drops a refused Event for good.
package record

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxNote is the API server's limit on an Event's note, in bytes.
const MaxNote = 1024

// Recorder wraps an EventRecorder, cutting notes to MaxNote.
type Recorder struct{ events.EventRecorder }

// New wraps r; a nil r records nothing.
func New(r events.EventRecorder) *Recorder { return &Recorder{EventRecorder: r} }

// Eventf records an Event whose note is cut to MaxNote by Note.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r == nil || r.EventRecorder == nil {
		return
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Note(fmt.Sprintf(note, args...)))
}

// Azure's error codes in the SDKs' error texts: ARM's "ERROR CODE: X" line, Entra's "error"
// field and its AADSTS number.
var (
	armCode   = regexp.MustCompile(`(?m)^ERROR CODE: (\S+)`)
	status    = regexp.MustCompile(`(?m)^RESPONSE (\d{3}):`)
	entraCode = regexp.MustCompile(`"error":\s*"([^"]+)"`)
	aadsts    = regexp.MustCompile(`AADSTS\d+`)
)

const cut = " … (cut)"

// Note is msg when it fits in MaxNote bytes; else its first line, then the HTTP status and
// Azure's error code found in the rest, cut at a character boundary to fit.
func Note(msg string) string {
	if len(msg) <= MaxNote {
		return msg
	}
	first, rest, _ := strings.Cut(msg, "\n")
	var facts []string
	if m := status.FindStringSubmatch(rest); m != nil {
		facts = append(facts, "RESPONSE "+m[1])
	}
	if m := armCode.FindStringSubmatch(msg); m != nil {
		facts = append(facts, "ERROR CODE: "+m[1])
	} else if m := entraCode.FindStringSubmatch(msg); m != nil {
		code := m[1]
		if n := aadsts.FindString(msg); n != "" {
			code += " (" + n + ")"
		}
		facts = append(facts, "ERROR CODE: "+code)
	}
	tail := cut
	if len(facts) > 0 {
		tail = cut + "\n" + strings.Join(facts, "\n")
	}
	if len(tail) > MaxNote/2 {
		tail = clip(tail, MaxNote/2)
	}
	return clip(first, MaxNote-len(tail)) + tail
}

// clip cuts s to at most n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
