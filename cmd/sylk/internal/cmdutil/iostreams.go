package cmdutil

import (
	"encoding/json"
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// IOStreams are the command's standard streams, injected so tests read exactly
// what a user sees.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// Terminal is true when Out is a terminal: progress bars and colour only then.
	Terminal bool
	// Color is true on a terminal unless NO_COLOR is set.
	Color bool
}

func DefaultIO() *IOStreams {
	term := isatty.IsTerminal(os.Stdout.Fd())
	_, noColor := os.LookupEnv("NO_COLOR")
	return &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Terminal: term, Color: term && !noColor}
}

// PrintJSON writes v as one line of JSON.
func (s *IOStreams) PrintJSON(v any) error {
	return json.NewEncoder(s.Out).Encode(v)
}

// PrintIndentedJSON writes v as indented JSON.
func PrintIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("  ", "  ")
	return enc.Encode(v)
}

// TruncateRunes cuts s to max runes, marking the cut.
func TruncateRunes(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max-1]) + "…"
}

// Dash is s, or "-" for nothing, in a table cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ShortCommit is the first 12 hex digits of a git commit.
func ShortCommit(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
