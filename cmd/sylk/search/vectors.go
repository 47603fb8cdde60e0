package search

import (
	"context"
	"errors"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Embedder is the configured embedder and a recorder of its vectors as
// events of session that r has folded once it returns; nil and why when no
// embedding model is configured (the search is then lexical only).
func Embedder(f *cmdutil.Factory, r *cmdutil.StateReader, session string) (*llm.Embedder, llm.RecordEmbeddings, string, error) {
	cfg, err := f.LLMConfig()
	if err != nil && !errors.Is(err, llm.ErrNotConfigured) {
		return nil, nil, "", err
	}
	e, err := llm.NewEmbedder(cfg, nil)
	if errors.Is(err, llm.ErrNoEmbeddings) {
		return nil, nil, "ranked by BM25 only: no embedding model (" + llm.EmbedHint + ")", nil
	}
	if err != nil {
		return nil, nil, "", cmdutil.UsageError{Err: err}
	}
	record := llm.RecordTo(r.Log, session, "user", f.Now)
	rec := func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		seq, err := record(ctx, embs)
		if err != nil {
			return 0, err
		}
		return seq, r.Sync(ctx, seq)
	}
	return e, rec, "", nil
}

// embedding records the vectors of the files of ix's root that have none
// (unless update is false) and the query's, and returns the query's; nil
// and why when the search must be lexical only. Nothing recorded is asked
// of the endpoint again.
func embedding(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader, ix *librarian.Indexer, session, query string, update bool) (*projections.CodeEmbedding, string, error) {
	e, rec, note, err := Embedder(f, r, session)
	if e == nil {
		return nil, note, err
	}
	if update {
		if _, err := ix.Embed(ctx, r, e, rec); err != nil {
			return nil, "ranked by BM25 only: embedding the files failed: " + err.Error(), nil
		}
	}
	return QueryVector(ctx, r, e, rec, query)
}

// QueryVector records the query's vector (once) and returns it; nil and why
// when the endpoint fails.
func QueryVector(ctx context.Context, r *cmdutil.StateReader, e *llm.Embedder, rec llm.RecordEmbeddings, query string) (*projections.CodeEmbedding, string, error) {
	vecs, _, err := e.Embed(ctx, r, rec, []string{query})
	if err != nil {
		return nil, "ranked by BM25 only: embedding the query failed: " + err.Error(), nil
	}
	return &projections.CodeEmbedding{Model: e.Model(), Dims: e.Dims(), Vector: vecs[0]}, "", nil
}
