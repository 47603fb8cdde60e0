package academic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Defaults of the ingester.
const (
	// DefaultMaxFileSize: larger files are skipped as too large.
	DefaultMaxFileSize = 16 << 20
	// DefaultMaxText bounds the text of one document (its event carries it
	// whole, and a NATS message holds 8 MiB).
	DefaultMaxText = 2 << 20
	// DefaultChunkBytes bounds a chunk: a section longer than this is cut
	// at paragraph breaks, so each chunk's vector is of all of it.
	DefaultChunkBytes = 3000
)

// formats maps file extensions to document formats.
var formats = map[string]string{
	".md": schemas.DocMarkdown, ".markdown": schemas.DocMarkdown,
	".html": schemas.DocHTML, ".htm": schemas.DocHTML,
	".txt": schemas.DocText, ".text": schemas.DocText, ".rst": schemas.DocText,
	".pdf": schemas.DocPDF,
}

// Format is the document format of a file's name, "" when it is not one.
func Format(name string) string { return formats[strings.ToLower(filepath.Ext(name))] }

// Ingester reads local documents into doc_update payloads. It reads files
// and nothing else: the caller records what it returns.
type Ingester struct {
	// Redactor removes secrets from the text before it is recorded.
	Redactor *tools.Redactor
	// MaxFileSize, MaxText and ChunkBytes (defaults above).
	MaxFileSize int64
	MaxText     int
	ChunkBytes  int
	// Reingest reads every document again, whatever its hash.
	Reingest bool
}

// NewIngester returns an ingester with the tools' built-in secret shapes.
func NewIngester() (*Ingester, error) {
	red, err := tools.NewRedactor(tools.SecretOptions{})
	if err != nil {
		return nil, err
	}
	return &Ingester{Redactor: red}, nil
}

// Ingest reads the documents at paths (files, or directories walked for
// files of a known format) and returns one update per document that is new
// or changed since known (path -> hash, what the projection holds), and one
// with every file skipped and why. A file named on purpose that is missing,
// unreadable, binary, too large, of an unknown format or a PDF that does
// not parse is skipped with its reason; none of them stops the others.
func (in *Ingester) Ingest(ctx context.Context, known map[string]string, paths []string) ([]schemas.DocUpdate, error) {
	var out []schemas.DocUpdate
	var skipped []schemas.DocSkip
	seen := map[string]bool{}
	skip := func(p, format string, args ...any) {
		if !seen[p] {
			seen[p] = true
			skipped = append(skipped, schemas.DocSkip{Path: p, Reason: fmt.Sprintf(format, args...)})
		}
	}
	file := func(abs string, named bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if seen[abs] {
			return nil
		}
		if Format(abs) == "" {
			if named {
				skip(abs, "unknown format %q (documents are .md, .html, .txt or .pdf)", filepath.Ext(abs))
			}
			return nil
		}
		doc, reason := in.read(abs, known[abs])
		switch {
		case reason != "":
			skip(abs, "%s", reason)
		case doc != nil:
			seen[abs] = true
			out = append(out, schemas.DocUpdate{Docs: []schemas.Document{*doc}})
		default:
			seen[abs] = true // unchanged
		}
		return nil
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		abs = filepath.ToSlash(abs)
		st, err := os.Stat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			skip(abs, "vanished: no such file")
			continue
		case err != nil:
			skip(abs, "unreadable: %v", err)
			continue
		case !st.IsDir():
			if err := file(abs, true); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(abs, func(q string, d fs.DirEntry, err error) error {
			q = filepath.ToSlash(q)
			if err != nil {
				skip(q, "unreadable: %v", err)
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				if q != abs && strings.HasPrefix(d.Name(), ".") {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil // symlinks are not followed: no loops
			}
			return file(q, false)
		})
		if err != nil {
			return nil, err
		}
	}
	if len(skipped) > 0 {
		out = append(out, schemas.DocUpdate{Skipped: skipped})
	}
	return out, nil
}

// read reads one document; nil and "" when its hash is still old, nil and
// the reason when it is skipped.
func (in *Ingester) read(abs, old string) (*schemas.Document, string) {
	st, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "vanished while it was read"
	}
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	maxSize := cmpOr(in.MaxFileSize, DefaultMaxFileSize)
	if st.Size() > maxSize {
		return nil, fmt.Sprintf("too large: %d bytes, at most %d", st.Size(), maxSize)
	}
	b, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "vanished while it was read"
	}
	if err != nil {
		return nil, "unreadable: " + err.Error()
	}
	if int64(len(b)) > maxSize {
		return nil, fmt.Sprintf("too large: %d bytes, at most %d (it grew while it was read)", len(b), maxSize)
	}
	hash := schemas.TextHash(string(b))
	if hash == old && !in.Reingest {
		return nil, ""
	}
	format := Format(abs)
	ex, err := extract(format, b)
	if err != nil {
		return nil, err.Error()
	}
	doc := &schemas.Document{Path: abs, Hash: hash, Size: int64(len(b)), Format: format, Title: ex.title}
	if doc.Title == "" {
		doc.Title = filepath.Base(abs)
	}
	total, max := 0, cmpOr(in.ChunkBytes, DefaultChunkBytes)
	for _, s := range ex.sections {
		text := in.Redactor.Redact(s.text)
		if text != s.text {
			doc.Redactions += len(in.Redactor.Find(s.text))
		}
		for _, c := range chunk(section{name: s.name, text: text}, max) {
			total += len(c.text)
			doc.Chunks = append(doc.Chunks, schemas.DocChunk{Section: c.name, Text: c.text, Hash: schemas.TextHash(c.text),
				EmbedHash: schemas.TextHash(EmbedText(doc.Title, c.name, c.text))})
		}
	}
	if limit := cmpOr(in.MaxText, DefaultMaxText); total > limit {
		return nil, fmt.Sprintf("too much text: %d bytes, at most %d a document", total, limit)
	}
	if len(doc.Chunks) == 0 {
		return nil, "no text"
	}
	return doc, ""
}

func cmpOr[T int | int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// EmbedText is the text a chunk's vector is made from: the document's title
// and the section's name, then the chunk's text (librarian.EmbedText's
// bound).
func EmbedText(title, sectionName, text string) string {
	return librarian.EmbedText(title+"\n"+sectionName, text)
}

// Known is what the projection holds: each ingested document's hash, and
// each skipped file (with an empty hash, so a file skipped before is read
// again).
func Known(ctx context.Context, r projections.Reader) (map[string]string, error) {
	res, err := r.Docs(ctx, projections.DocsQuery{Kind: projections.DocsList})
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(res.Docs))
	for _, d := range res.Docs {
		out[d.Path] = d.Hash
	}
	return out, nil
}

// UpdateEvents turns updates into doc_update events of session from source,
// addressed to the user (every record is), each with an id derived from
// what it says (each document's path and hash, each skip): recording the
// same update twice appends it once.
func UpdateEvents(session, source string, now time.Time, updates []schemas.DocUpdate) ([]*schemas.Envelope, error) {
	out := make([]*schemas.Envelope, 0, len(updates))
	for _, u := range updates {
		env, err := schemas.New(schemas.TypeDocUpdate, session, source, "user", now, u)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		for _, d := range u.Docs {
			h.Write([]byte("\x00d" + d.Path + "\x00" + d.Hash))
		}
		for _, r := range u.Removed {
			h.Write([]byte("\x00r" + r))
		}
		for _, s := range u.Skipped {
			h.Write([]byte("\x00s" + s.Path + "\x00" + s.Reason))
		}
		env.ID = schemas.DeriveID(&schemas.Envelope{ID: hex.EncodeToString(h.Sum(nil)), Timestamp: now}, "doc_update")
		out = append(out, env)
	}
	return out, nil
}

// Record appends updates as events and returns the sequence of the last (0
// when there are none).
func Record(ctx context.Context, log *events.Log, session, source string, now time.Time, updates []schemas.DocUpdate) (uint64, error) {
	envs, err := UpdateEvents(session, source, now, updates)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, env := range envs {
		seq, err := log.Append(ctx, env)
		if err != nil {
			return 0, err
		}
		last = max(last, seq)
	}
	return last, nil
}

// Counts sums what updates did: documents ingested, chunks, files skipped.
func Counts(ups []schemas.DocUpdate) (docs, chunks, skipped int) {
	for _, u := range ups {
		docs += len(u.Docs)
		for _, d := range u.Docs {
			chunks += len(d.Chunks)
		}
		skipped += len(u.Skipped)
	}
	return docs, chunks, skipped
}

// EmbedReport is what an embedding pass over the documents did.
type EmbedReport struct {
	// Chunks have a vector recorded (now or before); Sent went to the
	// endpoint.
	Chunks int `json:"chunks"`
	Sent   int `json:"sent"`
}

// Embed records the vectors of every ingested chunk that has none under
// e's model, read from the projection: a chunk whose vector is recorded is
// never sent again, so after an edit only the changed sections are.
func Embed(ctx context.Context, r projections.Reader, e *llm.Embedder, rec llm.RecordEmbeddings) (EmbedReport, error) {
	list, err := r.Docs(ctx, projections.DocsQuery{Kind: projections.DocsList})
	if err != nil {
		return EmbedReport{}, err
	}
	var texts []string
	for _, d := range list.Docs {
		res, err := r.Docs(ctx, projections.DocsQuery{Kind: projections.DocsChunks, Path: d.Path})
		if err != nil {
			return EmbedReport{}, err
		}
		for _, c := range res.Chunks {
			if t := EmbedText(d.Title, c.Section, c.Text); schemas.TextHash(t) == c.EmbedHash {
				texts = append(texts, t)
			}
		}
	}
	slices.Sort(texts)
	texts = slices.Compact(texts)
	if len(texts) == 0 {
		return EmbedReport{}, nil
	}
	_, sent, err := e.Embed(ctx, r, rec, texts)
	rep := EmbedReport{Sent: sent}
	if err == nil {
		rep.Chunks = len(texts)
	}
	return rep, err
}
