package skills

import (
	"regexp"
	"strings"
	"unicode"
)

// matcher finds a skill's trigger in a normalized task; it returns what
// matched.
type matcher interface {
	find(t *Task) (string, bool)
}

// Task is a task's text prepared for matching triggers: case-folded, every
// run of characters that are not letters or digits one space, with a space
// at both ends, so " word " finds a word and " two words " a phrase.
type Task struct {
	raw  string
	norm string
}

// NewTask prepares text for matching.
func NewTask(text string) *Task {
	var b strings.Builder
	b.Grow(len(text) + 2)
	b.WriteByte(' ')
	space := true
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
			space = false
		} else if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	if !space {
		b.WriteByte(' ')
	}
	return &Task{raw: text, norm: b.String()}
}

// literals is a trigger made of words and phrases separated by '|': the
// common case, matched without a regular expression.
type literals []string

func literalMatcher(words []string) literals {
	var out literals
	for _, w := range words {
		if n := NewTask(w).norm; n != " " && n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (l literals) find(t *Task) (string, bool) {
	for _, w := range l {
		if strings.Contains(t.norm, w) {
			return strings.TrimSpace(w), true
		}
	}
	return "", false
}

// pattern is any other trigger: a regular expression matched case-folded
// and word-bounded against the task as written.
type pattern struct{ re *regexp.Regexp }

func (p pattern) find(t *Task) (string, bool) {
	m := p.re.FindString(t.raw)
	return m, m != ""
}

// literalTrigger reports whether every alternative of trigger is words,
// spaces and hyphens only.
func literalTrigger(trigger string) bool {
	for _, r := range trigger {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '|' || r == ' ' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// compileTrigger turns a load trigger into a matcher: a '|'-separated list of
// words or phrases, or a regular expression (RE2 syntax). Either way a match
// is case-folded and must start and end at word boundaries, so "fix" does not
// fire on "prefix".
func compileTrigger(trigger string) (matcher, error) {
	if literalTrigger(trigger) {
		return literalMatcher(strings.Split(trigger, "|")), nil
	}
	re, err := regexp.Compile(`(?i)\b(?:` + trigger + `)\b`)
	if err != nil {
		return nil, err
	}
	return pattern{re}, nil
}
