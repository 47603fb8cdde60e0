package events

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Subject prefixes.
const (
	Prefix     = "sylk.v1"
	DLQPrefix  = "sylk.dlq"
	LivePrefix = "sylk.live"
	APIPrefix  = "sylk.api"
)

// Unaddressed is the subject's target token for an event with no target: the
// Guide routes it.
const Unaddressed = "guide"

// Subject is the subject env is published on.
func Subject(env *schemas.Envelope) string {
	target := env.Target
	if target == "" {
		target = Unaddressed
	}
	return Prefix + "." + env.SessionID + "." + env.Source + "." + target + "." + string(env.Type)
}

// DLQSubject is the dead-letter subject of a consumer.
func DLQSubject(consumer string) string { return DLQPrefix + "." + consumer }

// LiveSubject carries the LLM token chunks of one correlation, on core NATS.
func LiveSubject(session, correlation string) string {
	return LivePrefix + "." + session + "." + correlation
}

// Filter selects events by the subject's tokens; an empty field matches all.
type Filter struct {
	Session string
	Source  string
	Target  string
	Type    schemas.Type
}

// Subject is the NATS filter subject of f.
func (f Filter) Subject() string {
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return s
	}
	return Prefix + "." + tok(f.Session) + "." + tok(f.Source) + "." + tok(f.Target) + "." + tok(string(f.Type))
}

// Validate checks every non-empty field is a legal subject token and the type is
// in the catalogue.
func (f Filter) Validate() error {
	for _, c := range [...]struct{ name, v string }{
		{"session", f.Session}, {"source", f.Source}, {"target", f.Target},
	} {
		if c.v != "" && c.v != "*" {
			if err := schemas.CheckName(c.name, c.v); err != nil {
				return err
			}
		}
	}
	if f.Type != "" && f.Type != "*" && !f.Type.Known() {
		return fmt.Errorf("%w: --type %q (see `sylk schema` for the list)", schemas.ErrUnknownType, string(f.Type))
	}
	return nil
}

// ParseSubject reads a subject of the SYLK stream (possibly with wildcards) into
// a Filter. It accepts a bare suffix too: "S1.>" means "sylk.v1.S1.>".
func ParseSubject(s string) (string, error) {
	if s == "" || s == ">" {
		return Prefix + ".>", nil
	}
	if !strings.HasPrefix(s, Prefix+".") {
		s = Prefix + "." + s
	}
	toks := strings.Split(strings.TrimPrefix(s, Prefix+"."), ".")
	for i, t := range toks {
		if t == ">" && i != len(toks)-1 {
			return "", fmt.Errorf("subject %q: '>' must be the last token", s)
		}
		if t != "*" && t != ">" && !schemas.ValidName(t) {
			return "", fmt.Errorf("subject %q: token %q is not a name, '*' or '>'", s, t)
		}
	}
	if len(toks) > 4 || (len(toks) < 4 && toks[len(toks)-1] != ">") {
		return "", fmt.Errorf("subject %q: want sylk.v1.<session>.<source>.<target>.<type> (tokens may be '*', the last may be '>')", s)
	}
	return s, nil
}

// ErrForgedSource means an event's envelope names another sender than its
// subject. The server checks who may publish on a subject (a credential of
// agent kind K publishes only on sylk.v1.*.K.>); only the subject is vouched
// for, so a body that claims another source is forged.
var ErrForgedSource = errors.New("forged source")

// CheckSource reports ErrForgedSource when env's source is not the source
// token of subject, the subject it was stored under.
func CheckSource(subject string, env *schemas.Envelope) error {
	rest, ok := strings.CutPrefix(subject, Prefix+".")
	if !ok {
		return fmt.Errorf("%w: subject %q is not an event subject", ErrForgedSource, subject)
	}
	toks := strings.SplitN(rest, ".", 3)
	if len(toks) < 3 || toks[1] != env.Source {
		src := ""
		if len(toks) > 1 {
			src = toks[1]
		}
		return fmt.Errorf("%w: the envelope says source %q, but it was published as %q (subject %s)", ErrForgedSource, env.Source, src, subject)
	}
	return nil
}
