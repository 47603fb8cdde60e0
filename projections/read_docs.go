package projections

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Document query kinds.
const (
	DocsSearch = "search" // BM25 over the chunks (hybrid with an embedding)
	DocsList   = "list"   // the documents ingested and the files skipped
	DocsChunks = "chunks" // the chunks of the document Path, with their text
)

var docsKinds = []string{DocsSearch, DocsList, DocsChunks}

// DocsQuery asks the documents projection.
type DocsQuery struct {
	Kind string `json:"kind"`
	// Text is a search's question.
	Text string `json:"text,omitempty"`
	// Path names the document of a chunks query (absolute).
	Path string `json:"path,omitempty"`
	// Limit bounds a search's hits (0: DefaultCodeLimit).
	Limit int `json:"limit,omitempty"`
	// Embedding, for a search, ranks by vector similarity too (hybrid).
	Embedding *CodeEmbedding `json:"embedding,omitempty"`
}

// Validate reports what is wrong with q, wrapping ErrInvalidQuery.
func (q *DocsQuery) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: docs: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Contains(docsKinds, q.Kind):
		return bad("kind %q is not one of %s", q.Kind, strings.Join(docsKinds, ", "))
	case q.Limit < 0:
		return bad("limit %d is negative", q.Limit)
	case q.Kind == DocsSearch && strings.TrimSpace(q.Text) == "":
		return bad("a search needs text")
	case q.Kind == DocsChunks && !path.IsAbs(q.Path):
		return bad("path %q is not an absolute path", q.Path)
	case q.Embedding != nil && q.Kind != DocsSearch:
		return bad("an embedding goes with a search, not a %s query", q.Kind)
	case q.Embedding != nil && (q.Embedding.Model == "" || len(q.Embedding.Vector) == 0):
		return bad("the embedding needs its model and its vector")
	}
	return nil
}

// DocsResult answers a DocsQuery; the fields of its kind are set.
type DocsResult struct {
	Hits    []DocHit          `json:"hits,omitempty"`
	Docs    []DocInfo         `json:"docs,omitempty"`
	Skipped []schemas.DocSkip `json:"skipped,omitempty"`
	// Chunks of a chunks query, in order.
	Chunks []DocChunkText `json:"chunks,omitempty"`
	// Unknown lists query terms no chunk contains.
	Unknown []string `json:"unknown,omitempty"`
	// Ranking is how a search ranked: RankLexical or RankHybrid; Vectors
	// how many chunks it had vectors of.
	Ranking string `json:"ranking,omitempty"`
	Vectors int    `json:"vectors,omitempty"`
	// Chunks and Docs in the whole corpus.
	TotalDocs   int `json:"total_docs"`
	TotalChunks int `json:"total_chunks"`
}

// DocHit is a chunk a search found: where it is (a citation) and its text.
type DocHit struct {
	Path    string  `json:"path"`
	Title   string  `json:"title,omitempty"`
	Format  string  `json:"format"`
	Section string  `json:"section"`
	Chunk   int     `json:"chunk"`
	Text    string  `json:"text"`
	Score   float64 `json:"score"`
	// Lexical is the BM25 score and Similarity the cosine similarity to
	// the query's vector, of a hybrid search (Score is then the fused one).
	Lexical    float64 `json:"lexical,omitempty"`
	Similarity float64 `json:"similarity,omitempty"`
}

// DocInfo is an ingested document.
type DocInfo struct {
	Path   string `json:"path"`
	Hash   string `json:"hash"`
	Format string `json:"format"`
	Title  string `json:"title,omitempty"`
	Size   int64  `json:"size"`
	Chunks int    `json:"chunks"`
	Seq    uint64 `json:"seq"`
}

// DocChunkText is one chunk of a document.
type DocChunkText struct {
	Section   string `json:"section"`
	Text      string `json:"text"`
	Hash      string `json:"hash"`
	EmbedHash string `json:"embed_hash,omitempty"`
}

// Docs answers q from the documents projection.
func (s *Store) Docs(ctx context.Context, q DocsQuery) (*DocsResult, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultCodeLimit
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	out := &DocsResult{}
	tot, err := readJSON[docTotals](snap, docTotalsKey())
	if err != nil {
		return nil, err
	}
	if tot != nil {
		out.TotalDocs, out.TotalChunks = tot.Docs, tot.Chunks
	}
	switch q.Kind {
	case DocsSearch:
		if tot == nil {
			tot = &docTotals{}
		}
		err = s.docsSearch(snap, tot, &q, out)
	case DocsList:
		err = docsList(snap, out)
	case DocsChunks:
		err = docsChunks(snap, q.Path, out)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readJSON reads the JSON object at k, nil when there is none.
func readJSON[T any](r pebble.Reader, k []byte) (*T, error) {
	raw, err := getFrom(r, k)
	if err != nil || raw == nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("decode %q: %w", k, err)
	}
	return v, nil
}

func docsList(r pebble.Reader, out *DocsResult) error {
	err := scanPrefix(r, docsPrefix(), func(_, v []byte) error {
		var d DocRecord
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		out.Docs = append(out.Docs, DocInfo{Path: d.Path, Hash: d.Hash, Format: d.Format, Title: d.Title, Size: d.Size, Chunks: len(d.Chunks), Seq: d.Seq})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(out.Docs, func(a, b DocInfo) int { return strings.Compare(a.Path, b.Path) })
	err = scanPrefix(r, docSkipsPrefix(), func(_, v []byte) error {
		p, reason, _ := strings.Cut(string(v), "\n")
		out.Skipped = append(out.Skipped, schemas.DocSkip{Path: p, Reason: reason})
		return nil
	})
	slices.SortFunc(out.Skipped, func(a, b schemas.DocSkip) int { return strings.Compare(a.Path, b.Path) })
	return err
}

func docsChunks(r pebble.Reader, p string, out *DocsResult) error {
	did := DocID(p)
	d, err := readJSON[DocRecord](r, docKey(did))
	if err != nil || d == nil {
		return err
	}
	for i, c := range d.Chunks {
		text, err := getFrom(r, docChunkKey(did, i))
		if err != nil {
			return err
		}
		out.Chunks = append(out.Chunks, DocChunkText{Section: c.Section, Text: string(text), Hash: c.Hash, EmbedHash: c.EmbedHash})
	}
	return nil
}

// docsSearch ranks chunks by BM25 over the query's terms, fused with the
// vector ranking when the query has an embedding.
func (s *Store) docsSearch(r pebble.Reader, tot *docTotals, q *DocsQuery, out *DocsResult) error {
	terms, err := queryTerms("docs", q.Text)
	if err != nil {
		return err
	}
	avgdl := float64(tot.Length) / float64(max(tot.Chunks, 1))
	hits, unknown, err := rankBM25(terms, tot.Chunks, avgdl, func(term string, add func(posting)) error {
		prefix := docTermPrefix(term)
		return scanPrefix(r, prefix, func(k, v []byte) error {
			p, _, err := decodePosting(prefix, k, v)
			if err == nil {
				add(p)
			}
			return err
		})
	})
	if err != nil {
		return err
	}
	out.Unknown = unknown
	hits, out.Ranking, out.Vectors, err = s.vectors.rerank(r, docEmbedsAll(), tot.Seq, q.Embedding, q.Limit, hits)
	if err != nil {
		return err
	}
	if len(hits) > q.Limit {
		hits = hits[:q.Limit]
	}
	docs := map[string]*DocRecord{}
	for _, h := range hits {
		did, idx, ok := splitChunkID(h.Path)
		if !ok {
			return fmt.Errorf("docs: a chunk id %q that names no chunk", h.Path)
		}
		d, ok := docs[did]
		if !ok {
			var err error
			if d, err = readJSON[DocRecord](r, docKey(did)); err != nil {
				return err
			}
			docs[did] = d
		}
		if d == nil || idx >= len(d.Chunks) {
			continue // cannot happen: a chunk's keys go with its document
		}
		text, err := getFrom(r, docChunkKey(did, idx))
		if err != nil {
			return err
		}
		out.Hits = append(out.Hits, DocHit{Path: d.Path, Title: d.Title, Format: d.Format, Section: d.Chunks[idx].Section, Chunk: idx,
			Text: string(text), Score: h.Score, Lexical: h.Lexical, Similarity: h.Similarity})
	}
	return nil
}

// splitChunkID reads "<doc id>\0<index>" (the tail of a posting's or an
// embed hash's key).
func splitChunkID(id string) (string, int, bool) {
	if len(id) < 5 || id[len(id)-5] != sep {
		return "", 0, false
	}
	return id[:len(id)-5], int(binary.BigEndian.Uint32([]byte(id[len(id)-4:]))), true
}
