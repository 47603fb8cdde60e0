package llm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
)

// embedFixture is a stack, the scripted endpoint and an embedder over it
// recording into the stack's stream.
func embedFixture(t *testing.T, dims int) (*llmtest.Stack, *llmtest.Server, *llm.Embedder, llm.RecordEmbeddings) {
	t.Helper()
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	e, err := llm.NewEmbedder(llm.Config{BaseURL: srv.URL(), EmbeddingModel: "embed-fake", EmbeddingDims: dims, Timeout: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := llm.RecordTo(st.Log, "_", "user", time.Now)
	return st, srv, e, func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		seq, err := rec(ctx, embs)
		if err == nil {
			err = st.Store.WaitFor(ctx, seq)
		}
		return seq, err
	}
}

// Each text is embedded once: a second ask, even after the projections are
// rebuilt from the stream, is answered from the recorded events.
func TestEmbedderRecordsOnce(t *testing.T) {
	st, srv, e, rec := embedFixture(t, 16)
	texts := []string{"retry with backoff", "parse the config file", "retry with backoff"}
	vecs, sent, err := e.Embed(st.Ctx, st.Store, rec, texts)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 2 || srv.EmbedCalls() != 1 {
		t.Fatalf("sent %d texts in %d calls, want 2 in 1 (the duplicate once)", sent, srv.EmbedCalls())
	}
	for i, text := range texts {
		if !slices.Equal(vecs[i], llmtest.Vector(text, 16)) {
			t.Fatalf("vector %d is not the endpoint's", i)
		}
	}
	if r := srv.EmbedRequests()[0]; r.Model != "embed-fake" || r.Dimensions != 16 {
		t.Fatalf("request: %+v", r)
	}

	if err := st.Store.Projector(st.Log).Rebuild(st.Ctx, nil); err != nil {
		t.Fatal(err)
	}
	last, err := st.Log.LastSeq(st.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Store.WaitFor(st.Ctx, last); err != nil {
		t.Fatal(err)
	}
	again, sent, err := e.Embed(st.Ctx, st.Store, rec, append(texts, "parse the config file"))
	if err != nil {
		t.Fatal(err)
	}
	if sent != 0 || srv.EmbedCalls() != 1 {
		t.Fatalf("after a rebuild: sent %d, calls %d; want none", sent, srv.EmbedCalls())
	}
	if !slices.Equal(again[1], vecs[1]) || !slices.Equal(again[3], vecs[1]) {
		t.Fatal("recorded vectors differ from the first answer")
	}
	got, err := st.Store.Embeddings(st.Ctx, []string{e.Key(schemas.TextHash(texts[0])), "0123"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[e.Key(schemas.TextHash(texts[0]))].Model != "embed-fake" {
		t.Fatalf("Embeddings: %+v", got)
	}
}

// A failing endpoint, a wrong dimension and a hanging call are errors that
// say so, and nothing is recorded for them.
func TestEmbedderRefusesBadAnswers(t *testing.T) {
	st, srv, e, rec := embedFixture(t, 8)
	srv.ScriptEmbeddings(llmtest.EmbedReply{Status: 500}, llmtest.EmbedReply{Dims: 3})
	for _, want := range []string{"500", "3 dimensions, 8 asked for"} {
		_, _, err := e.Embed(st.Ctx, st.Store, rec, []string{"some text"})
		if !errors.Is(err, llm.ErrEmbedding) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want ErrEmbedding saying %q", err, want)
		}
	}
	if got, _ := st.Store.Embeddings(st.Ctx, []string{e.Key(schemas.TextHash("some text"))}); len(got) != 0 {
		t.Fatalf("a refused answer was recorded: %+v", got)
	}
	if _, err := llm.NewEmbedder(llm.Config{BaseURL: srv.URL()}, nil); !errors.Is(err, llm.ErrNoEmbeddings) {
		t.Fatalf("no model: %v", err)
	}
}
