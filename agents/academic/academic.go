// Package academic is the Academic: it knows "what can be done" from
// outside knowledge, here the local documents a user ingested (`sylk docs
// add`: Markdown, HTML, plain text and PDF text, chunked by section and
// recorded as doc_update events). It answers research_request from them,
// each finding cited and labelled with the seed's applicability to the
// work directory (DIRECT, ADAPTABLE, INCOMPATIBLE; seed L17449-17847),
// judged against the Librarian's code index without an LLM.
package academic

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Name is the Academic's agent name.
const Name = "academic"

// DefaultFindings is how many chunks an answer cites.
const DefaultFindings = 5

// Academic answers research requests from the ingested documents.
type Academic struct {
	Store projections.Reader
	// DefaultWorkDir is the work directory findings are judged against for
	// sessions that name none.
	DefaultWorkDir string
	// Embedder, when set, makes the search hybrid (the question's vector is
	// recorded once); without one the ranking is BM25 and the answer says so.
	Embedder *llm.Embedder
}

// Handle answers one research_request.
func (a *Academic) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	env := d.Env
	if env.Type != schemas.TypeResearchRequest {
		return nil, nil
	}
	q, err := schemas.PayloadAs[schemas.ResearchRequest](env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	// The documents ingested before the question are in the stream before
	// it: wait until the projections hold them.
	if err := a.Store.WaitFor(ctx, d.Seq); err != nil {
		return nil, err
	}
	var emb *projections.CodeEmbedding
	note := "Ranking: BM25 only (no embedding model is configured)."
	if a.Embedder != nil {
		vecs, _, err := a.Embedder.Embed(ctx, a.Store, librarian.RecordCaused(d, a.Store, Name), []string{q.Query})
		if err != nil {
			note = "Ranking: BM25 only (embedding the question failed: " + err.Error() + ")."
		} else {
			emb, note = &projections.CodeEmbedding{Model: a.Embedder.Model(), Dims: a.Embedder.Dims(), Vector: vecs[0]}, ""
		}
	}
	root := librarian.WorkDir(ctx, a.Store, env.SessionID, a.DefaultWorkDir)
	ans, err := Answer(ctx, a.Store, root, q.Query, emb)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if note != "" {
		ans.Answer += "\n" + note
	}
	target := env.Source
	if target == "" || target == Name {
		target = "user"
	}
	out, err := d.Derive(schemas.TypeResearchResponse, target, "answer", ans)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{out}, nil
}

// Applicability labels and confidences (seed L17638-17664).
const (
	Direct       = "DIRECT"
	Adaptable    = "ADAPTABLE"
	Incompatible = "INCOMPATIBLE"
)

// Answer searches the ingested documents for query (hybrid with emb, else
// BM25) and judges each chunk found against the code index of root (an
// absolute work directory): a chunk that names a declaration of the code, or
// whose examples are in a language of it, applies DIRECTly; one whose
// examples are all in languages the code does not use is INCOMPATIBLE (with
// what to adapt); anything else is ADAPTABLE.
func Answer(ctx context.Context, r projections.Reader, root, query string, emb *projections.CodeEmbedding) (schemas.ResearchResponse, error) {
	words := 0
	projections.Terms(query, func(string) { words++ })
	if words == 0 {
		return schemas.ResearchResponse{Answer: fmt.Sprintf("%q has no word to search the documents for.", query)}, nil
	}
	res, err := r.Docs(ctx, projections.DocsQuery{Kind: projections.DocsSearch, Text: query, Limit: DefaultFindings, Embedding: emb})
	if err != nil {
		return schemas.ResearchResponse{}, err
	}
	if res.TotalDocs == 0 {
		return schemas.ResearchResponse{Answer: "No documents are ingested: 'sylk docs add PATH...' adds Markdown, HTML, text and PDF files."}, nil
	}
	if len(res.Hits) == 0 {
		return schemas.ResearchResponse{Answer: fmt.Sprintf("Nothing in the %d ingested documents matches %q.", res.TotalDocs, query)}, nil
	}
	code, err := codebaseOf(ctx, r, root)
	if err != nil {
		return schemas.ResearchResponse{}, err
	}
	var b strings.Builder
	out := schemas.ResearchResponse{}
	fmt.Fprintf(&b, "Research on %q: %d findings in %d ingested documents (ranked by %s).\n", query, len(res.Hits), res.TotalDocs, res.Ranking)
	for i, h := range res.Hits {
		f, err := code.judge(ctx, r, h)
		if err != nil {
			return schemas.ResearchResponse{}, err
		}
		out.Findings = append(out.Findings, f)
		out.References = append(out.References, f.Source)
		fmt.Fprintf(&b, "[%d] %s (%s) %s: %s\n    %s\n    Codebase alignment: %s\n", i+1, f.Applicability, f.Confidence, f.Source, f.Title, f.Excerpt, f.Alignment)
		if len(f.AdaptationNeeded) > 0 {
			fmt.Fprintf(&b, "    %s\n", strings.Join(f.AdaptationNeeded, "\n    "))
		} else {
			b.WriteString("    Adaptation: None\n")
		}
	}
	if code.health != nil {
		fmt.Fprintf(&b, "Codebase maturity: %s. %s\n", code.health.Maturity, code.health.Recommendation)
	}
	out.Answer = strings.TrimRight(b.String(), "\n")
	switch out.Findings[0].Applicability {
	case Direct:
		out.Confidence = 0.8
	case Adaptable:
		out.Confidence = 0.5
	default:
		out.Confidence = 0.2
	}
	return out, nil
}

// codebase is what the findings are judged against.
type codebase struct {
	root    string
	indexed bool
	health  *projections.CodeHealthReport
}

func codebaseOf(ctx context.Context, r projections.Reader, root string) (*codebase, error) {
	c := &codebase{root: root}
	hr, err := r.Code(ctx, projections.CodeQuery{Root: root, Kind: projections.CodeHealth})
	if err != nil {
		return nil, err
	}
	c.indexed = hr.Indexed
	if hr.Indexed {
		c.health = hr.Health
	}
	return c, nil
}

// languages are the work directory's source languages, most files first.
func (c *codebase) languages() []string {
	if c.health == nil {
		return nil
	}
	langs := slices.Collect(maps.Keys(c.health.Languages))
	slices.SortFunc(langs, func(a, b string) int {
		if n := c.health.Languages[b] - c.health.Languages[a]; n != 0 {
			return n
		}
		return strings.Compare(a, b)
	})
	return langs
}

// excerptBytes bounds a finding's excerpt.
const excerptBytes = 300

// judge labels one chunk found.
func (c *codebase) judge(ctx context.Context, r projections.Reader, h projections.DocHit) (schemas.ResearchFinding, error) {
	f := schemas.ResearchFinding{Source: Citation(h.Path, h.Section), Title: h.Title, Section: h.Section, Excerpt: excerpt(h.Text), Score: h.Score}
	if !c.indexed {
		f.Applicability, f.Confidence = Adaptable, "MEDIUM"
		f.Alignment = "not compared: the work directory " + c.root + " has no code index ('sylk index update' makes one)"
		return f, nil
	}
	var named []string
	for _, id := range librarian.Identifiers(h.Text) {
		if len(named) == 3 {
			break
		}
		res, err := r.Code(ctx, projections.CodeQuery{Root: c.root, Kind: projections.CodeSymbol, Text: id, Limit: 1})
		if err != nil {
			return f, err
		}
		for _, s := range res.Symbols {
			named = append(named, fmt.Sprintf("%s (%s:%d)", id, s.Path, s.Line))
		}
	}
	have := c.languages()
	docLangs := Languages(h.Text)
	var shared []string
	for _, l := range docLangs {
		if slices.Contains(have, l) {
			shared = append(shared, l)
		}
	}
	switch {
	case len(named) > 0:
		f.Applicability, f.Confidence = Direct, "HIGH"
		f.Alignment = "it names code of the work directory: " + strings.Join(named, ", ")
	case len(shared) > 0:
		f.Applicability, f.Confidence = Direct, "HIGH"
		f.Alignment = "its examples are in " + strings.Join(shared, ", ") + ", a language of the work directory"
	case len(docLangs) > 0 && len(have) > 0:
		f.Applicability, f.Confidence = Incompatible, "LOW"
		f.Alignment = "its examples are in " + strings.Join(docLangs, ", ") + ", which the work directory does not use"
		f.AdaptationNeeded = []string{fmt.Sprintf("ADAPTATION NEEDED: codebase uses %s, research suggests %s. To apply: translate the pattern into %s and its libraries.",
			strings.Join(have, ", "), strings.Join(docLangs, ", "), have[0])}
	default:
		f.Applicability, f.Confidence = Adaptable, "MEDIUM"
		f.Alignment = "general guidance: it names no code of the work directory and shows no code in its languages"
		if len(have) > 0 {
			f.AdaptationNeeded = []string{"Adaptation: map it onto the work directory's " + have[0] + " code; nothing there implements it yet."}
		}
	}
	return f, nil
}

// Citation names a chunk: the document's path and its section.
func Citation(path, section string) string {
	if section == "" {
		return path
	}
	return path + "#" + section
}

// excerpt is the start of a chunk's text on one line.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= excerptBytes {
		return s
	}
	cut := excerptBytes
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// fenceLangs maps the tags of fenced code blocks to the code index's
// language names.
var fenceLangs = map[string]string{
	"go": "go", "golang": "go", "python": "python", "py": "python", "python3": "python",
	"js": "javascript", "javascript": "javascript", "jsx": "javascript", "node": "javascript",
	"ts": "typescript", "typescript": "typescript", "tsx": "typescript", "rust": "rust", "rs": "rust",
	"java": "java", "kotlin": "kotlin", "kt": "kotlin", "c": "c", "cpp": "cpp", "c++": "cpp",
	"csharp": "csharp", "cs": "csharp", "c#": "csharp", "ruby": "ruby", "rb": "ruby", "php": "php",
	"swift": "swift", "scala": "scala", "lua": "lua", "zig": "zig",
}

// namedLangs are language names a text can mention unambiguously (not "Go"
// or "C", which are ordinary words too).
var namedLangs = map[string]string{
	"golang": "go", "python": "python", "javascript": "javascript", "typescript": "typescript",
	"rust": "rust", "java": "java", "kotlin": "kotlin", "ruby": "ruby", "php": "php", "scala": "scala",
}

// Languages are the programming languages a chunk's examples are in: the
// tags of its fenced code blocks, and the languages it names.
func Languages(text string) []string {
	var out []string
	add := func(l string) {
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			tag := strings.ToLower(strings.TrimSpace(strings.Trim(t, "`~")))
			tag, _, _ = strings.Cut(tag, " ")
			add(fenceLangs[tag])
		}
	}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) }) {
		if len(w) > 1 && unicode.IsUpper(rune(w[0])) {
			add(namedLangs[strings.ToLower(w)])
		}
	}
	slices.Sort(out)
	return out
}
