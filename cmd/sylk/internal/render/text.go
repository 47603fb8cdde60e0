// Package render holds the text views that several commands print: events,
// sessions, DAGs, plans, and the small formatting they share.
package render

import (
	"encoding/json"
	"strings"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/schemas"
)

// FirstLine is the first line of s, cut to 160 runes.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return cmdutil.TruncateRunes(s, 160)
}

// OrDash is s, or "-" for nothing.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ListOrDash is l joined with commas, or "-" for nothing.
func ListOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}

// Summary is the payload as compact JSON, cut to max runes.
func Summary(e *schemas.Envelope, max int) string {
	p, err := schemas.DecodePayload(e)
	if err != nil {
		return "(payload: " + err.Error() + ")"
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "(payload not printable)"
	}
	return cmdutil.TruncateRunes(strings.ReplaceAll(string(b), "\n", " "), max)
}
