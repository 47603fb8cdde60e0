package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	// maxWalkEntries bounds the entries one list, glob or grep call visits.
	maxWalkEntries = 200000
	// maxListDepth caps the depth argument of list.
	maxListDepth = 20
	// maxGrepLineBytes: grep matches at most this much of a line.
	maxGrepLineBytes = 64 << 10
	// grepShowBytes: a matching line is shown cut to this length.
	grepShowBytes = 400
	// maxGrepMatches caps the max_matches argument of grep.
	maxGrepMatches = 100000
	// maxPatternLen caps glob and grep patterns.
	maxPatternLen = 1024
)

// errWalkLimit stops a walk that visited maxWalkEntries entries.
var errWalkLimit = errors.New("walk limit reached")

// walk visits the tree under rel (relative to the work directory) in
// lexical order, skipping .git directories. fn receives slash-separated
// paths relative to the work directory. It checks ctx as it goes.
func (e *Executor) walk(ctx context.Context, rel string, fn func(p string, d fs.DirEntry) error) (limited bool, err error) {
	root, err := e.root.open()
	if err != nil {
		return false, err
	}
	defer root.Close()
	n := 0
	err = fs.WalkDir(root.FS(), relSlash(rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == relSlash(rel) {
				return err
			}
			return nil // an unreadable entry below the start: skip it
		}
		if n++; n > maxWalkEntries {
			return errWalkLimit
		}
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if d.IsDir() && d.Name() == ".git" && p != relSlash(rel) {
			return fs.SkipDir
		}
		return fn(p, d)
	})
	if errors.Is(err, errWalkLimit) {
		return true, nil
	}
	return false, err
}

// walkFailure turns a failed walk into a failed Result, or into an
// interruption when the context ended.
func walkFailure(tool, p string, err error) (Result, error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Result{ExitCode: -1, Partial: true, Canceled: true, Error: tool + ": canceled"}, &interruptedError{err: err}
	}
	return failed("%s: %s", tool, describeFSError(p, err)), nil
}

type listArgs struct {
	Path       string `json:"path"`
	Depth      *int   `json:"depth"`
	MaxEntries *int   `json:"max_entries"`
}

type entry struct {
	Path   string `json:"path"`
	Type   string `json:"type"` // file, dir, symlink, other
	Size   int64  `json:"size,omitempty"`
	Target string `json:"target,omitempty"`
}

type listData struct {
	Entries   []entry `json:"entries"`
	Truncated bool    `json:"truncated,omitempty"`
}

func (e *Executor) listTool() builtin {
	return builtin{
		name:     ToolList,
		readOnly: true,
		desc:     "List the entries of a directory in the work directory (directories end with /), optionally several levels deep. .git is skipped.",
		schema: func() schema {
			return object(schema{
				"path":        str(`Directory, relative to the work directory. Default ".".`),
				"depth":       integer("How many levels to descend; 1 lists the directory itself. Default 1.", 1, maxListDepth),
				"max_entries": integer(fmt.Sprintf("Most entries to return. Default %d.", e.opts.Files.MaxEntries), 1, maxWalkEntries),
			})
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a listArgs
			if err := decodeArgs(ToolList, e.tools[ToolList].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.list(ctx, a)
		},
	}
}

func (e *Executor) maxEntries(tool string, n *int) (int, error) {
	return optInt(tool, "max_entries", n, e.opts.Files.MaxEntries, 1, maxWalkEntries)
}

func (e *Executor) list(ctx context.Context, a listArgs) (Result, error) {
	depth, err := optInt(ToolList, "depth", a.Depth, 1, 1, maxListDepth)
	if err != nil {
		return Result{}, err
	}
	limit, err := e.maxEntries(ToolList, a.MaxEntries)
	if err != nil {
		return Result{}, err
	}
	p := a.Path
	if p == "" {
		p = "."
	}
	rel, res, ok, err := e.resolveArg("path", p)
	if !ok {
		return res, err
	}
	start := relSlash(rel)
	baseDepth := strings.Count(start, "/") + 1
	if start == "." {
		baseDepth = 0
	}
	var d listData
	stopped := errors.New("enough")
	limited, err := e.walk(ctx, rel, func(q string, de fs.DirEntry) error {
		if q == start && de.IsDir() {
			return nil
		}
		if len(d.Entries) >= limit {
			d.Truncated = true
			return stopped
		}
		d.Entries = append(d.Entries, e.describeEntry(q, de))
		if de.IsDir() && strings.Count(q, "/")+1-baseDepth >= depth {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, stopped) {
		return walkFailure(ToolList, p, err)
	}
	d.Truncated = d.Truncated || limited
	var out strings.Builder
	for _, en := range d.Entries {
		out.WriteString(en.display())
		out.WriteByte('\n')
	}
	r := Result{OK: true, Output: out.String(), Truncated: d.Truncated, Data: dataOf(d),
		Summary: fmt.Sprintf("list %s: %d entries", start, len(d.Entries))}
	if d.Truncated {
		r.Summary += " (truncated; list a subdirectory or raise max_entries)"
	}
	return r, nil
}

func (e *Executor) describeEntry(p string, de fs.DirEntry) entry {
	en := entry{Path: p, Type: "other"}
	switch t := de.Type(); {
	case t.IsDir():
		en.Type = "dir"
	case t.IsRegular():
		en.Type = "file"
		if fi, err := de.Info(); err == nil {
			en.Size = fi.Size()
		}
	case t&fs.ModeSymlink != 0:
		en.Type = "symlink"
		if target, err := os.Readlink(filepath.Join(e.root.dir, filepath.FromSlash(p))); err == nil {
			en.Target = target
		}
	}
	return en
}

func (en entry) display() string {
	switch en.Type {
	case "dir":
		return en.Path + "/"
	case "symlink":
		return en.Path + " -> " + en.Target
	}
	return en.Path
}

type globArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	MaxEntries *int   `json:"max_entries"`
}

func (e *Executor) globTool() builtin {
	return builtin{
		name:     ToolGlob,
		readOnly: true,
		desc: "Find files and directories whose path matches a glob pattern: * and ? match within one path element, " +
			"[abc] a character class, ** any number of directories (\"**/*_test.go\"). Paths are relative to the work directory. .git is skipped.",
		schema: func() schema {
			return object(schema{
				"pattern":     nonEmptyStr(`Glob pattern relative to path, with / as separator, e.g. "**/*.go" or "cmd/*/main.go".`),
				"path":        str(`Directory to search under, relative to the work directory. Default ".".`),
				"max_entries": integer(fmt.Sprintf("Most paths to return. Default %d.", e.opts.Files.MaxEntries), 1, maxWalkEntries),
			}, "pattern")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a globArgs
			if err := decodeArgs(ToolGlob, e.tools[ToolGlob].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.glob(ctx, a)
		},
	}
}

// checkGlob validates a glob pattern.
func checkGlob(tool, field, pat string) error {
	switch {
	case pat == "":
		return fmt.Errorf("%w: %s: %s is required", ErrInvalidArgs, tool, field)
	case len(pat) > maxPatternLen:
		return fmt.Errorf("%w: %s: %s is longer than %d bytes", ErrInvalidArgs, tool, field, maxPatternLen)
	case strings.HasPrefix(pat, "/"):
		return fmt.Errorf("%w: %s: %s %q must be relative (set path to choose the directory)", ErrInvalidArgs, tool, field, pat)
	case strings.Count(pat, "**") > 4:
		return fmt.Errorf("%w: %s: %s %q has more than 4 ** elements", ErrInvalidArgs, tool, field, pat)
	}
	for _, seg := range strings.Split(pat, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: %s: %s %q must not contain ..", ErrInvalidArgs, tool, field, pat)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("%w: %s: %s %q: %w", ErrInvalidArgs, tool, field, pat, err)
		}
	}
	return nil
}

// matchGlob matches a slash-separated name against a pattern where **
// stands for any number of path elements.
func matchGlob(pat, name string) bool {
	return matchSegs(strings.Split(pat, "/"), strings.Split(name, "/"))
}

func matchSegs(ps, ns []string) bool {
	for len(ps) > 0 {
		if ps[0] == "**" {
			for len(ps) > 0 && ps[0] == "**" {
				ps = ps[1:]
			}
			if len(ps) == 0 {
				return true
			}
			for i := 0; i <= len(ns); i++ {
				if matchSegs(ps, ns[i:]) {
					return true
				}
			}
			return false
		}
		if len(ns) == 0 {
			return false
		}
		if ok, _ := path.Match(ps[0], ns[0]); !ok {
			return false
		}
		ps, ns = ps[1:], ns[1:]
	}
	return len(ns) == 0
}

func (e *Executor) glob(ctx context.Context, a globArgs) (Result, error) {
	if err := checkGlob(ToolGlob, "pattern", a.Pattern); err != nil {
		return Result{}, err
	}
	limit, err := e.maxEntries(ToolGlob, a.MaxEntries)
	if err != nil {
		return Result{}, err
	}
	p := a.Path
	if p == "" {
		p = "."
	}
	rel, res, ok, err := e.resolveArg("path", p)
	if !ok {
		return res, err
	}
	start := relSlash(rel)
	var d listData
	stopped := errors.New("enough")
	limited, err := e.walk(ctx, rel, func(q string, de fs.DirEntry) error {
		if q == start {
			return nil
		}
		sub := q
		if start != "." {
			sub = strings.TrimPrefix(q, start+"/")
		}
		if !matchGlob(a.Pattern, sub) {
			return nil
		}
		if len(d.Entries) >= limit {
			d.Truncated = true
			return stopped
		}
		d.Entries = append(d.Entries, e.describeEntry(q, de))
		return nil
	})
	if err != nil && !errors.Is(err, stopped) {
		return walkFailure(ToolGlob, p, err)
	}
	d.Truncated = d.Truncated || limited
	var out strings.Builder
	for _, en := range d.Entries {
		out.WriteString(en.display())
		out.WriteByte('\n')
	}
	r := Result{OK: true, Output: out.String(), Truncated: d.Truncated, Data: dataOf(d),
		Summary: fmt.Sprintf("glob %q under %s: %d matches", a.Pattern, start, len(d.Entries))}
	if d.Truncated {
		r.Summary += " (truncated)"
	}
	return r, nil
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	Literal    bool   `json:"literal"`
	MaxMatches *int   `json:"max_matches"`
}

type grepMatch struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

type grepData struct {
	Matches       []grepMatch `json:"matches"`
	FilesSearched int         `json:"files_searched"`
	FilesSkipped  int         `json:"files_skipped,omitempty"`
	// Sensitive are the files not searched because they hold secrets
	// (SensitiveFile).
	Sensitive []string `json:"sensitive,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
}

func (e *Executor) grepTool() builtin {
	return builtin{
		name:     ToolGrep,
		readOnly: true,
		desc: "Search text files in the work directory for lines matching a regular expression (RE2 syntax) or a literal string. " +
			"Returns path:line: text for each match. Binary files, files over " + sizeString(e.opts.Files.MaxGrepFileBytes) + " and .git are skipped.",
		schema: func() schema {
			return object(schema{
				"pattern":     nonEmptyStr("Regular expression (RE2), or plain text when literal is true."),
				"path":        str(`File or directory to search, relative to the work directory. Default ".".`),
				"glob":        str(`Only search files matching this glob, e.g. "*.go" (matched against the file name) or "internal/**/*.go" (against the path).`),
				"ignore_case": boolean("Match case-insensitively. Default false."),
				"literal":     boolean("Treat pattern as plain text, not a regular expression. Default false."),
				"max_matches": integer(fmt.Sprintf("Most matching lines to return. Default %d.", e.opts.Files.MaxMatches), 1, maxGrepMatches),
			}, "pattern")
		},
		run: func(ctx context.Context, e *Executor, _ string, raw json.RawMessage) (Result, error) {
			var a grepArgs
			if err := decodeArgs(ToolGrep, e.tools[ToolGrep].fields, raw, &a); err != nil {
				return Result{}, err
			}
			return e.grep(ctx, a)
		},
	}
}

func (e *Executor) grep(ctx context.Context, a grepArgs) (Result, error) {
	switch {
	case a.Pattern == "":
		return Result{}, fmt.Errorf("%w: grep: pattern is required", ErrInvalidArgs)
	case len(a.Pattern) > maxPatternLen:
		return Result{}, fmt.Errorf("%w: grep: pattern is longer than %d bytes", ErrInvalidArgs, maxPatternLen)
	}
	limit, err := optInt(ToolGrep, "max_matches", a.MaxMatches, e.opts.Files.MaxMatches, 1, maxGrepMatches)
	if err != nil {
		return Result{}, err
	}
	if a.Glob != "" {
		if err := checkGlob(ToolGrep, "glob", a.Glob); err != nil {
			return Result{}, err
		}
	}
	expr := a.Pattern
	if a.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Result{}, fmt.Errorf("%w: grep: pattern %q is not a valid RE2 regular expression (set literal to search plain text): %w", ErrInvalidArgs, truncForMsg(a.Pattern), err)
	}
	p := a.Path
	if p == "" {
		p = "."
	}
	rel, res, ok, err := e.resolveArg("path", p)
	if !ok {
		return res, err
	}
	root, err := e.root.open()
	if err != nil {
		return failed("grep: %v", err), nil
	}
	defer root.Close()
	fsys := root.FS()
	var d grepData
	stopped := errors.New("enough")
	limited, err := e.walk(ctx, rel, func(q string, de fs.DirEntry) error {
		if !de.Type().IsRegular() {
			return nil
		}
		if a.Glob != "" {
			name := q
			if !strings.Contains(a.Glob, "/") {
				name = path.Base(q)
			}
			if !matchGlob(a.Glob, name) {
				return nil
			}
		}
		if _, ok := SensitiveFile(q); ok {
			d.Sensitive = append(d.Sensitive, q)
			return nil
		}
		if fi, err := de.Info(); err != nil || fi.Size() > e.opts.Files.MaxGrepFileBytes {
			d.FilesSkipped++
			return nil
		}
		data, err := fs.ReadFile(fsys, q)
		if err != nil {
			d.FilesSkipped++
			return nil
		}
		if bytes.IndexByte(data[:min(len(data), binarySniffBytes)], 0) >= 0 {
			d.FilesSkipped++
			return nil
		}
		d.FilesSearched++
		// Match against the redacted text: a match never shows a secret,
		// and a pattern cannot probe one character by character.
		text := e.red.Redact(string(data))
		for n := 1; len(text) > 0; n++ {
			lineText, rest, _ := strings.Cut(text, "\n")
			text = rest
			lineText = strings.TrimSuffix(lineText, "\r")
			if len(lineText) > maxGrepLineBytes {
				lineText = lineText[:maxGrepLineBytes]
			}
			if !re.MatchString(lineText) {
				continue
			}
			if len(d.Matches) >= limit {
				d.Truncated = true
				return stopped
			}
			if len(lineText) > grepShowBytes {
				lineText = lineText[:grepShowBytes] + " [...]"
			}
			d.Matches = append(d.Matches, grepMatch{Path: q, Line: n, Text: strings.ToValidUTF8(lineText, "\uFFFD")})
		}
		return nil
	})
	if err != nil && !errors.Is(err, stopped) {
		return walkFailure(ToolGrep, p, err)
	}
	d.Truncated = d.Truncated || limited
	var out strings.Builder
	for _, m := range d.Matches {
		fmt.Fprintf(&out, "%s:%d: %s\n", m.Path, m.Line, m.Text)
	}
	r := Result{OK: true, Output: out.String(), Truncated: d.Truncated, Data: dataOf(d),
		Summary: fmt.Sprintf("grep %q: %d matches in %d files searched", a.Pattern, len(d.Matches), d.FilesSearched)}
	if d.FilesSkipped > 0 {
		r.Summary += fmt.Sprintf(" (%d binary, large or unreadable files skipped)", d.FilesSkipped)
	}
	if n := len(d.Sensitive); n > 0 {
		r.Summary += fmt.Sprintf(" (%d sensitive files not searched: %s)", n, strings.Join(d.Sensitive[:min(n, 5)], ", "))
	}
	if d.Truncated {
		r.Summary += "; truncated: narrow the pattern or path, or raise max_matches"
	}
	return r, nil
}
