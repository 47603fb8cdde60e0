package schemas

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// The knowledge layer's events: what the Librarian learned about a work
// directory. The code index is a projection of these events, so what an event
// carries is exactly what a rebuild can know: the facts extracted from each
// file (symbols, calls, imports, term counts), never the file's text.
const (
	TypeIndexUpdate    Type = "index_update"
	TypeHistoryPromote Type = "history_promote"
)

var knowledgeTypes = map[Type]typeInfo{
	TypeIndexUpdate:    entry[IndexUpdate]("Files of a work directory the Librarian (re)indexed, removed or skipped, keyed by content hash."),
	TypeHistoryPromote: entry[HistoryPromote]("A session's history entry promoted to project scope: every session's queries see it."),
}

// HistoryPromote promotes a history entry (by its event's id) to project
// scope (seed L33442). Seq is the entry's stream sequence, which the
// promoter resolved; the projection refuses a promotion whose id and
// sequence do not name the same entry.
type HistoryPromote struct {
	EntryID string `json:"entry_id"`
	Seq     uint64 `json:"seq"`
	Reason  string `json:"reason,omitempty"`
}

// IndexUpdate records what changed in the code index of one work directory:
// files indexed anew (each with the hash of the content it was extracted
// from), files gone, and files skipped with the reason. Files not named are
// unchanged.
type IndexUpdate struct {
	// Root is the work directory, absolute; paths are relative to it, with
	// forward slashes.
	Root string `json:"root"`
	// Vocab is the terms the files' TermRefs name, each once, separated by
	// spaces: the first is term 0. A term's bytes are written once an
	// event rather than once a file (most of a tree's terms recur from
	// file to file).
	Vocab   string        `json:"vocab,omitempty"`
	Files   []IndexedFile `json:"files,omitempty"`
	Removed []string      `json:"removed,omitempty"`
	Skipped []IndexSkip   `json:"skipped,omitempty"`
}

// IndexedFile is what indexing one file extracted.
type IndexedFile struct {
	Path string `json:"path"`
	// Hash is the SHA-256 (hex, first 16 bytes) of the file's bytes as read.
	Hash  string `json:"hash"`
	Size  int64  `json:"size"`
	Lang  string `json:"lang"`
	Lines int    `json:"lines"`
	// Package is a Go file's import path (its directory's, under the nearest
	// go.mod), or "" for other languages.
	Package string   `json:"package,omitempty"`
	Imports []string `json:"imports,omitempty"`
	Symbols []Symbol `json:"symbols,omitempty"`
	Calls   []Call   `json:"calls,omitempty"`
	// TermRefs counts each search term of the redacted text (and of the
	// path): pairs of uvarints, the term's number in the update's Vocab and
	// its count, as projections.TermVocab writes them.
	TermRefs []byte `json:"term_refs,omitempty"`
	// Terms is the counts in the format before TermRefs, still read:
	// "term count" pairs separated by spaces ("config 4 loader 2").
	Terms string `json:"terms,omitempty"`
	// Debt counts TODO, FIXME, HACK and XXX markers.
	Debt int  `json:"debt,omitempty"`
	Test bool `json:"test,omitempty"`
	// Stubbed: a sensitive file (keys, credentials, .env): only its name is
	// indexed.
	Stubbed bool `json:"stubbed,omitempty"`
	// Redactions counts the secrets removed before extraction.
	Redactions int `json:"redactions,omitempty"`
	// EmbedHash is the TextHash of the text an embedding of this file is
	// made from (its path and the start of its redacted text); "" for a
	// stubbed file.
	EmbedHash string `json:"embed_hash,omitempty"`
	// ParseError is why a Go file's syntax could not be read in full (its
	// terms are indexed all the same).
	ParseError string `json:"parse_error,omitempty"`
}

// SymbolKinds are the kinds of declaration the code index records (a
// Symbol's Kind), what a code query's type filter names.
var SymbolKinds = []string{"func", "method", "struct", "interface", "type", "var", "const"}

// CodeLanguages are the languages the code index files a file under (an
// IndexedFile's Lang), what a code query's language filter names: "build"
// is a build file (go.mod, Makefile), "data" a data or markup format, and
// "text" anything else.
var CodeLanguages = []string{
	"build", "c", "cpp", "csharp", "data", "go", "java", "javascript", "kotlin", "lua", "markdown",
	"php", "proto", "python", "ruby", "rust", "scala", "shell", "sql", "swift", "text", "typescript", "zig",
}

// Symbol is a declaration in a file.
type Symbol struct {
	Name string `json:"name"`
	// Kind: func, method, struct, interface, type, var, const.
	Kind string `json:"kind"`
	// Recv is a method's receiver type name.
	Recv      string `json:"recv,omitempty"`
	Line      int    `json:"line"`
	EndLine   int    `json:"end_line,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Doc: the declaration has a doc comment.
	Doc bool `json:"doc,omitempty"`
}

// Call is a call from a function or method of the file to a named function.
type Call struct {
	// From is the caller: "Func" or "Recv.Method".
	From string `json:"from"`
	// To is the callee as written, qualified by the import path of its
	// package when that is known ("github.com/x/y.Parse", "fmt.Println"), by
	// the file's own package for a local function, and "?.Name" for a
	// method called on a value whose type is not resolved.
	To   string `json:"to"`
	Line int    `json:"line"`
}

// IndexSkip is a file the index left out, and why (binary, too large,
// unreadable, vanished, a symlink loop, ...).
type IndexSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// termCount reads a term's count: a few decimal digits, read here without
// strconv's generality (a full index parses millions), anything else by
// strconv.Atoi.
func termCount(c string) (int, error) {
	if len(c) == 0 || len(c) > 9 {
		return strconv.Atoi(c)
	}
	n := 0
	for i := 0; i < len(c); i++ {
		d := c[i] - '0'
		if d > 9 {
			return strconv.Atoi(c)
		}
		n = n*10 + int(d)
	}
	return n, nil
}

// ParseTermRefs calls fn with each term number and count of refs, in
// IndexedFile.TermRefs's format; it stops at the first malformed pair.
func ParseTermRefs(refs []byte, fn func(term, n uint64)) error {
	for all := len(refs); len(refs) > 0; {
		t, k := binary.Uvarint(refs)
		if k <= 0 {
			return fmt.Errorf("term refs: byte %d does not start a term number (a uvarint)", all-len(refs))
		}
		refs = refs[k:]
		n, k := binary.Uvarint(refs)
		if k <= 0 {
			return fmt.Errorf("term refs: term %d has no count", t)
		}
		refs = refs[k:]
		fn(t, n)
	}
	return nil
}

// ParseTerms calls fn with each term and count of s, in IndexedFile.Terms's
// format; it stops at the first malformed pair.
func ParseTerms(s string, fn func(term string, n int)) error {
	for s != "" {
		t, rest, ok := strings.Cut(s, " ")
		if !ok {
			return fmt.Errorf("terms: %q has no count", t)
		}
		c, rest, _ := strings.Cut(rest, " ")
		n, err := termCount(c)
		if err != nil || n < 0 {
			return fmt.Errorf("terms: the count of %q is %q, not a number", t, c)
		}
		fn(t, n)
		s = rest
	}
	return nil
}
