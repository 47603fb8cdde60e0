// Package librarian is the Librarian: it knows what exists in a work
// directory. It keeps the code index up to date (the files, and for Go the
// packages, declarations, calls and imports, extracted without an LLM and
// recorded as index_update events that the code projection folds) and
// answers context_request from it: the declarations a question names, the
// files a ranked search finds, and the health of the area (seed
// L16810-17447).
package librarian

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Librarian answers context requests from the code index.
type Librarian struct {
	// Store is read for sessions' work directories and the index, and
	// waited on until it has folded the updates the Librarian records.
	Store projections.Reader
	// DefaultWorkDir is indexed for sessions that name no work directory
	// ("": the process's current directory).
	DefaultWorkDir string
	// MaxFileSize bounds the files indexed (default DefaultMaxFileSize).
	MaxFileSize int64
	// Embedder, when set, makes searches hybrid: the files' and the
	// question's vectors are recorded (once each) and ranked beside BM25.
	// Without one, or when the endpoint fails, the answer is lexical and
	// says so.
	Embedder *llm.Embedder
	// LLM, when set, writes the answer from what the index retrieved (the
	// retrieval follows it, and its references are the answer's). Nil: the
	// retrieval is the answer.
	LLM Completer
}

// Completer makes recorded LLM calls: *llm.Client.
type Completer interface {
	Complete(ctx context.Context, d *agents.Delivery, req llm.Request) (schemas.LLMResponse, bool, error)
}

// synthesisPrompt is the system prompt of the answer written over the
// retrieved context (seed L16810-17447: the Librarian answers from the
// index, not from memory).
const synthesisPrompt = `You are the Librarian of Sylk. You answer questions about the code of a work directory from what
its index retrieved for the question, given below, and from nothing else. Answer in a few sentences, name the
files and lines as the context gives them (path:line), and say plainly when the context does not answer it.`

// Handle answers one context_request: it brings the index of the session's
// work directory up to date (recording what changed before anything else),
// then answers from it.
func (l *Librarian) Handle(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	env := d.Env
	if env.Type != schemas.TypeContextRequest {
		return nil, nil
	}
	q, err := schemas.PayloadAs[schemas.ContextRequest](env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	ix, err := l.refresh(ctx, d, l.workDir(ctx, env.SessionID))
	if err != nil {
		return nil, err
	}
	emb, note := l.embedding(ctx, d, ix, q.Query)
	ans, err := Answer(ctx, l.Store, ix.Root, *q, emb)
	if errors.Is(err, projections.ErrInvalidQuery) {
		// The asker's mistake: the answer says what it was.
		ans, err = schemas.ContextResponse{Answer: "The request cannot be answered: " + err.Error()}, nil
	}
	if err != nil {
		return nil, agents.Permanent(err)
	}
	target := env.Source
	if target == "" || target == Name {
		target = "user"
	}
	if note != "" {
		ans.Answer += "\n" + note
	}
	if ans, err = l.synthesize(ctx, d, q.Query, ans); err != nil {
		return nil, err
	}
	out, err := d.Derive(schemas.TypeContextResponse, target, "answer", ans)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{out}, nil
}

// synthesize has the LLM, when there is one, write the answer to query
// from the retrieved answer ans, which follows it; with nothing retrieved,
// or when the call fails for good, ans is the answer (saying why). A call
// that may succeed later is retried with the message.
func (l *Librarian) synthesize(ctx context.Context, d *agents.Delivery, query string, ans schemas.ContextResponse) (schemas.ContextResponse, error) {
	if l.LLM == nil || len(ans.References) == 0 {
		return ans, nil
	}
	msgs := []schemas.LLMMessage{{Role: "system", Content: synthesisPrompt},
		{Role: "user", Content: "Question: " + query + "\n\nRetrieved from the index:\n" + ans.Answer}}
	resp, _, err := l.LLM.Complete(ctx, d, llm.Request{Key: "synthesis", Messages: msgs})
	if err != nil {
		if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
			return ans, err
		}
		ans.Answer += "\n(the LLM could not write the answer: " + err.Error() + ")"
		return ans, nil
	}
	ans.Answer = strings.TrimSpace(resp.Content) + "\n\nRetrieved from the index:\n" + ans.Answer
	return ans, nil
}

// workDir is the session's work directory, else the default.
func (l *Librarian) workDir(ctx context.Context, session string) string {
	return WorkDir(ctx, l.Store, session, l.DefaultWorkDir)
}

// WorkDir is the work directory of session, else def, else ".".
func WorkDir(ctx context.Context, r projections.Reader, session, def string) string {
	if s, err := r.Session(ctx, session); err == nil && s.Config.WorkDir != "" {
		return s.Config.WorkDir
	}
	if def == "" {
		return "."
	}
	return def
}

// refresh records what changed in root since the index last saw it, and
// waits until the index has it. The events' ids come from their content, so
// a redelivered request records nothing twice.
func (l *Librarian) refresh(ctx context.Context, d *agents.Delivery, root string) (*Indexer, error) {
	ix, err := NewIndexer(root)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	ix.MaxFileSize = l.MaxFileSize
	_, last, err := Update(ctx, l.Store, ix, nil, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
		envs, err := UpdateEvents(d.Env.SessionID, Name, d.Now(), ups)
		if err != nil {
			return 0, agents.Permanent(err)
		}
		return appendCaused(ctx, d, envs)
	})
	if err == nil && last > 0 {
		err = l.Store.WaitFor(ctx, last)
	}
	return ix, err
}

// embedding brings the vectors of root's files up to date and returns the
// question's, each recorded once as an event of the request; nil and a note
// saying why when the search is lexical only.
func (l *Librarian) embedding(ctx context.Context, d *agents.Delivery, ix *Indexer, query string) (*projections.CodeEmbedding, string) {
	if l.Embedder == nil {
		return nil, "Ranking: BM25 only (no embedding model is configured)."
	}
	rec := RecordCaused(d, l.Store, Name)
	if _, err := ix.Embed(ctx, l.Store, l.Embedder, rec); err != nil {
		return nil, "Ranking: BM25 only (embedding the files failed: " + err.Error() + ")."
	}
	vecs, _, err := l.Embedder.Embed(ctx, l.Store, rec, []string{query})
	if err != nil {
		return nil, "Ranking: BM25 only (embedding the question failed: " + err.Error() + ")."
	}
	return &projections.CodeEmbedding{Model: l.Embedder.Model(), Dims: l.Embedder.Dims(), Vector: vecs[0]}, ""
}

// RecordCaused records embeddings as events of agent caused by the
// delivered request, and waits until r has folded them.
func RecordCaused(d *agents.Delivery, r projections.Reader, agent string) llm.RecordEmbeddings {
	return func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		envs, err := llm.EmbeddingEvents(d.Env.SessionID, agent, d.Now(), embs)
		if err != nil {
			return 0, err
		}
		last, err := appendCaused(ctx, d, envs)
		if err != nil {
			return 0, err
		}
		return last, r.WaitFor(ctx, last)
	}
}

// appendCaused appends envs now, as caused by the delivered request, and
// returns the sequence of the last.
func appendCaused(ctx context.Context, d *agents.Delivery, envs []*schemas.Envelope) (uint64, error) {
	var last uint64
	for _, e := range envs {
		e.CorrelationID, e.ParentID = d.Env.CorrelationID, d.Env.ID
		seq, err := d.AppendNow(ctx, e)
		if err != nil {
			return 0, err
		}
		last = max(last, seq)
	}
	return last, nil
}

// Answer is what the index says about req's query, without an LLM: the
// declarations it names (with their callers), the files a ranked search
// finds (hybrid with the question's embedding emb, else BM25), and the
// health of the area the best of them is in. The declarations and files are
// of the types and languages req keeps; a filter naming an unknown type or
// language is an error wrapping projections.ErrInvalidQuery.
func Answer(ctx context.Context, r projections.Reader, root string, req schemas.ContextRequest, emb *projections.CodeEmbedding) (schemas.ContextResponse, error) {
	query := req.Query
	filter := projections.CodeQuery{Root: root, Kind: projections.CodeSearch, Text: "x", Types: req.Types, Langs: req.Langs}
	if err := filter.Validate(); err != nil {
		return schemas.ContextResponse{}, err
	}
	var b strings.Builder
	var refs []string
	confidence := 0.0
	ref := func(p string, line int) {
		s := p
		if line > 0 {
			s = fmt.Sprintf("%s:%d", p, line)
		}
		if !slices.Contains(refs, s) {
			refs = append(refs, s)
		}
	}
	for _, name := range Identifiers(query) {
		res, err := r.Code(ctx, projections.CodeQuery{Root: root, Kind: projections.CodeSymbol, Text: name, Limit: 5, Types: req.Types, Langs: req.Langs})
		if err != nil {
			return schemas.ContextResponse{}, err
		}
		for _, s := range res.Symbols {
			confidence = 0.9
			fmt.Fprintf(&b, "%s %s is defined at %s:%d", s.Kind, qualifiedName(s), s.Path, s.Line)
			if s.Signature != "" {
				fmt.Fprintf(&b, ": %s", s.Signature)
			}
			b.WriteString("\n")
			ref(s.Path, s.Line)
			callers, err := r.Code(ctx, projections.CodeQuery{Root: root, Kind: projections.CodeCallers, Text: qualifiedName(s), Limit: 10})
			if err != nil {
				return schemas.ContextResponse{}, err
			}
			for _, c := range callers.Calls {
				fmt.Fprintf(&b, "  called by %s at %s:%d\n", c.From, c.Path, c.Line)
			}
		}
	}
	words := 0
	projections.Terms(query, func(string) { words++ })
	kind := projections.CodeSearch
	if words == 0 {
		kind = projections.CodeStatus // nothing to search for: only whether there is an index
	}
	sq := projections.CodeQuery{Root: root, Kind: kind, Text: query, Limit: 5}
	if kind == projections.CodeSearch {
		sq.Embedding, sq.Types, sq.Langs = emb, req.Types, req.Langs
	}
	res, err := r.Code(ctx, sq)
	if err != nil {
		return schemas.ContextResponse{}, err
	}
	if !res.Indexed {
		return schemas.ContextResponse{Answer: "The work directory " + root + " has no index yet."}, nil
	}
	area := "."
	if len(res.Hits) > 0 {
		confidence = max(confidence, 0.6)
		b.WriteString("Files that match:\n")
		for _, h := range res.Hits {
			fmt.Fprintf(&b, "  %s (%.2f)", h.Path, h.Score)
			for i, s := range h.Symbols {
				if i == 3 {
					b.WriteString(" …")
					break
				}
				fmt.Fprintf(&b, " %s:%d", s.Name, s.Line)
			}
			b.WriteString("\n")
			ref(h.Path, 0)
		}
		area = path.Dir(res.Hits[0].Path)
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "Nothing in the index matches %q.\n", query)
	}
	hr, err := r.Code(ctx, projections.CodeQuery{Root: root, Kind: projections.CodeHealth, Text: area})
	if err != nil {
		return schemas.ContextResponse{}, err
	}
	if h := hr.Health; h != nil && h.Files > 0 {
		fmt.Fprintf(&b, "CODEBASE HEALTH %s: %s | Tests: %.0f%% of source files | Debt: %d markers (%.1f per 1000 lines) | Documented: %.0f%%\nRecommendation: %s\n",
			h.Area, h.Maturity, h.TestRatio*100, h.DebtMarkers, h.DebtPer1K, h.Documented*100, h.Recommendation)
	}
	return schemas.ContextResponse{Answer: strings.TrimRight(b.String(), "\n"), References: refs, Confidence: confidence}, nil
}

func qualifiedName(s projections.CodeSymbolHit) string {
	if s.Recv != "" {
		return s.Recv + "." + s.Name
	}
	return s.Name
}

// Identifiers are the words of a text that look like names in code: with
// an upper-case letter after the first, an underscore, or a dot between
// words (Store.History, parse_config, RootID).
func Identifiers(q string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(q, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '.'
	}) {
		w = strings.Trim(w, ".")
		if len(w) < 3 || slices.Contains(out, w) {
			continue
		}
		if strings.ContainsAny(w, "_.") || strings.IndexFunc(w[1:], unicode.IsUpper) >= 0 {
			out = append(out, w)
		}
	}
	return out
}
