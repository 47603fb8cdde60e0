package skills

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
)

// FileName is the file that makes a directory a skill.
const FileName = "SKILL.md"

// Limits of the format (the Agent Skills specification, and Sylk's tiers).
const (
	MaxNameLen          = 64
	MaxDescriptionLen   = 1024
	MaxCompatibilityLen = 500
	MaxTier             = 3
	// DefaultTier is the tier of a skill that does not say: loaded when its
	// trigger matches the task.
	DefaultTier = 2
	// DefaultPriority orders skills of the same tier (higher first).
	DefaultPriority = 50
	// TriggerExplicit as a load trigger means: only when asked for (tier 3).
	TriggerExplicit = "explicit_request"
)

// Sentinel errors; a Problem wraps one.
var (
	// ErrInvalid is a SKILL.md that breaks a rule of the format.
	ErrInvalid = errors.New("invalid skill")
	// ErrUnknown is a skill name the catalogue does not hold.
	ErrUnknown = errors.New("unknown skill")
)

// Skill is one parsed SKILL.md.
type Skill struct {
	// Name is the frontmatter name, equal to the directory's name.
	Name        string
	Description string
	License     string
	// Compatibility says what the skill needs of its environment.
	Compatibility string
	// AllowedTools are tools the skill works with: selecting the skill loads
	// their schemas (when the agent may use them; it never widens an agent's
	// permissions).
	AllowedTools []string
	// Agents the skill is for; empty means every agent.
	Agents []string
	// Tier is 0-3: 0 and 1 load at agent start, 2 when the trigger matches
	// the task, 3 only when the task names the skill.
	Tier int
	// Trigger is the load trigger as written ("" when none).
	Trigger  string
	Keywords []string
	Priority int
	// Metadata holds the metadata keys that are not Sylk's, as text.
	Metadata map[string]string
	// Body is the markdown after the frontmatter.
	Body string
	// Chars is the body's length in characters.
	Chars int
	// Dir is where the skill lives ("builtin:NAME" for embedded ones);
	// References, Assets and Scripts are the files of those subdirectories,
	// relative to Dir. Scripts are listed, never run.
	Dir        string
	References []string
	Assets     []string
	Scripts    []string
	// Source names the catalogue location the skill came from.
	Source string

	match matcher
}

// For reports whether the skill is for agent.
func (s *Skill) For(agent string) bool {
	return len(s.Agents) == 0 || slices.Contains(s.Agents, agent)
}

// Problem is one thing wrong with a SKILL.md.
type Problem struct {
	// Path is the SKILL.md (or directory) it is about.
	Path string
	// Field is the frontmatter key, "body", or "" for the file as a whole.
	Field string
	Msg   string
	// Fatal problems make the skill unusable; others are warnings (an
	// oversized body is truncated).
	Fatal bool

	missing bool // there is no SKILL.md
}

func (p Problem) Error() string {
	where := p.Path
	if p.Field != "" {
		where += ": " + p.Field
	}
	return where + ": " + p.Msg
}

// Is makes a Problem match ErrInvalid.
func (p Problem) Is(target error) bool { return target == ErrInvalid }

var nameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName reports whether s is a skill name: 1-64 of [a-z0-9-], no hyphen
// at either end and no two in a row.
func ValidName(s string) bool { return len(s) <= MaxNameLen && nameRE.MatchString(s) }

// frontmatterKeys are the keys a SKILL.md frontmatter may have; any other is
// an error (strict, like plan files).
var frontmatterKeys = []string{"name", "description", "license", "compatibility", "allowed-tools", "metadata"}

// Sylk's keys under metadata.
const (
	metaAgents   = "agents"
	metaTier     = "tier"
	metaTrigger  = "load-trigger"
	metaKeywords = "keywords"
	metaPriority = "priority"
)

// Parse reads the skill in directory dir of fsys. It returns the skill and
// every problem found, fatal or not; the skill is nil when one is fatal.
// maxBody is the body cap a warning is given for (0: DefaultMaxBodyChars).
func Parse(fsys fs.FS, dir string, maxBody int) (*Skill, []Problem) {
	file := path.Join(dir, FileName)
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, []Problem{{Path: file, Msg: fmt.Sprintf("cannot read: %v", unwrapPath(err)), Fatal: true, missing: errors.Is(err, fs.ErrNotExist)}}
	}
	s, probs := parseSource(file, path.Base(dir), src, maxBody)
	if s != nil {
		s.References, s.Assets, s.Scripts = listFiles(fsys, dir)
	}
	return s, probs
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseSource parses the text of a SKILL.md whose directory is named dirName.
func parseSource(file, dirName string, src []byte, maxBody int) (*Skill, []Problem) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyChars
	}
	var probs []Problem
	bad := func(field, format string, args ...any) {
		probs = append(probs, Problem{Path: file, Field: field, Msg: fmt.Sprintf(format, args...), Fatal: true})
	}
	front, body, ok := splitFrontmatter(src)
	if !ok {
		bad("", "no YAML frontmatter: the file must start with a line \"---\", the keys (name, description, ...), and a closing \"---\"")
		return nil, probs
	}
	var raw map[string]any
	if err := yaml.Unmarshal(front, &raw); err != nil {
		bad("", "frontmatter is not valid YAML: %s", yaml.FormatError(err, false, false))
		return nil, probs
	}
	s := &Skill{Body: strings.TrimSpace(string(body)), Tier: DefaultTier, Priority: DefaultPriority, Metadata: map[string]string{}}
	s.Chars = utf8.RuneCountInString(s.Body)
	var unknown []string
	for k := range raw {
		if !slices.Contains(frontmatterKeys, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		bad(k, "unknown key (the keys are %s; Sylk's own go under metadata)", strings.Join(frontmatterKeys, ", "))
	}

	s.Name = text(raw, "name", bad)
	switch {
	case s.Name == "":
		bad("name", "missing: give the skill's name, which must be the directory's name %q", dirName)
	case !ValidName(s.Name):
		bad("name", "%q is not a skill name: 1-%d of a-z, 0-9 and '-', no '-' at either end or twice in a row", s.Name, MaxNameLen)
	case s.Name != dirName:
		bad("name", "%q is not the directory's name %q: rename one of them", s.Name, dirName)
	}
	s.Description = strings.TrimSpace(text(raw, "description", bad))
	switch n := utf8.RuneCountInString(s.Description); {
	case n == 0:
		bad("description", "missing or empty: say what the skill does and when to use it")
	case n > MaxDescriptionLen:
		bad("description", "%d characters, at most %d", n, MaxDescriptionLen)
	}
	s.License = text(raw, "license", bad)
	s.Compatibility = text(raw, "compatibility", bad)
	if n := utf8.RuneCountInString(s.Compatibility); n > MaxCompatibilityLen {
		bad("compatibility", "%d characters, at most %d", n, MaxCompatibilityLen)
	}
	s.AllowedTools = words(raw["allowed-tools"], "allowed-tools", bad)

	if m, ok := raw["metadata"]; ok && m != nil {
		meta, ok := m.(map[string]any)
		if !ok {
			bad("metadata", "must be a mapping of keys to values, not %s", kind(m))
		}
		parseMeta(s, meta, bad)
	}
	if err := s.compile(); err != nil {
		bad("metadata.load-trigger", "%q is not a valid pattern: %v", s.Trigger, err)
	}
	if s.Trigger == TriggerExplicit && s.Tier < 3 {
		s.Tier = 3
	}
	if s.Chars > maxBody {
		probs = append(probs, Problem{Path: file, Field: "body", Msg: fmt.Sprintf("%d characters, over the cap of %d: it will be truncated in prompts; move detail to references/", s.Chars, maxBody)})
	}
	if s.Body == "" {
		bad("body", "empty: the instructions go after the frontmatter")
	}
	for _, p := range probs {
		if p.Fatal {
			return nil, probs
		}
	}
	return s, probs
}

// compile makes the skill's matcher from its load trigger (or, for a tier 2
// skill without one, its keywords or name).
func (s *Skill) compile() error {
	switch {
	case s.Trigger != "" && s.Trigger != TriggerExplicit:
		m, err := compileTrigger(s.Trigger)
		s.match = m
		return err
	case s.Trigger == "" && s.Tier == 2:
		// No trigger: the keywords, else the name's words, are the trigger.
		lits := s.Keywords
		if len(lits) == 0 {
			lits = []string{s.Name}
		}
		s.match = literalMatcher(lits)
	}
	return nil
}

func parseMeta(s *Skill, meta map[string]any, bad func(field, format string, args ...any)) {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := meta[k]
		field := "metadata." + k
		switch k {
		case metaAgents:
			s.Agents = words(v, field, bad)
			for _, a := range s.Agents {
				if !ValidName(a) {
					bad(field, "%q is not an agent name", a)
				}
			}
		case metaKeywords:
			s.Keywords = words(v, field, bad)
		case metaTier:
			if n, ok := integer(v, field, bad); ok {
				if n < 0 || n > MaxTier {
					bad(field, "%d is not a tier: 0 (always), 1 (at agent start), 2 (when the trigger matches), 3 (only when asked for)", n)
				}
				s.Tier = n
			}
		case metaPriority:
			if n, ok := integer(v, field, bad); ok {
				if n < 0 || n > 100 {
					bad(field, "%d is out of range 0-100", n)
				}
				s.Priority = n
			}
		case metaTrigger:
			s.Trigger = strings.TrimSpace(text(meta, k, func(_ string, f string, a ...any) { bad(field, f, a...) }))
		default:
			s.Metadata[k] = fmt.Sprint(v)
		}
	}
}

// splitFrontmatter cuts "---\n<yaml>\n---\n<body>".
func splitFrontmatter(src []byte) (front, body []byte, ok bool) {
	src = bytes.TrimPrefix(src, []byte("\ufeff"))
	line, rest, found := bytes.Cut(src, []byte("\n"))
	if !found || string(bytes.TrimRight(line, " \r")) != "---" {
		return nil, nil, false
	}
	for off := 0; off < len(rest); {
		end := bytes.IndexByte(rest[off:], '\n')
		next := len(rest)
		if end >= 0 {
			next = off + end + 1
		}
		if string(bytes.TrimRight(rest[off:next], " \r\n")) == "---" {
			return rest[:off], rest[next:], true
		}
		off = next
	}
	return nil, nil, false
}

func text(m map[string]any, key string, bad func(field, format string, args ...any)) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case uint64, int64, float64, bool:
		return fmt.Sprint(x)
	}
	bad(key, "must be text, not %s", kind(v))
	return ""
}

// words reads a space-delimited string (the Agent Skills way) or a list.
func words(v any, field string, bad func(field, format string, args ...any)) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return strings.FieldsFunc(x, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				bad(field, "list item %v is %s, not text", e, kind(e))
				continue
			}
			out = append(out, strings.TrimSpace(s))
		}
		return out
	}
	bad(field, "must be a space-separated string or a list, not %s", kind(v))
	return nil
}

func integer(v any, field string, bad func(field, format string, args ...any)) (int, bool) {
	switch x := v.(type) {
	case uint64:
		return int(x), true
	case int64:
		return int(x), true
	case string: // the specification's metadata values are strings
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, true
		}
	}
	bad(field, "must be a whole number, not %v", v)
	return 0, false
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "text"
	case bool:
		return "a boolean"
	case nil:
		return "empty"
	}
	return "a number"
}

// listFiles lists the files under references/, assets/ and scripts/.
func listFiles(fsys fs.FS, dir string) (refs, assets, scripts []string) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, nil, nil
	}
	for _, e := range entries {
		var into *[]string
		switch e.Name() {
		case "references":
			into = &refs
		case "assets":
			into = &assets
		case "scripts":
			into = &scripts
		default:
			continue
		}
		if !e.IsDir() {
			continue
		}
		_ = fs.WalkDir(fsys, path.Join(dir, e.Name()), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				*into = append(*into, strings.TrimPrefix(p, dir+"/"))
			}
			return nil
		})
	}
	return refs, assets, scripts
}
