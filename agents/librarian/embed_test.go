package librarian

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// embedRig is a rig, the scripted endpoint and an embedder recording into
// the rig's stream.
func embedRig(t *testing.T) (*rig, *llmtest.Server, *llm.Embedder, llm.RecordEmbeddings) {
	r := newRig(t)
	srv := llmtest.New(t)
	e, err := llm.NewEmbedder(llm.Config{BaseURL: srv.URL(), EmbeddingModel: "embed-fake", Timeout: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	record := llm.RecordTo(r.log, "_", Name, time.Now)
	return r, srv, e, func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		seq, err := record(ctx, embs)
		if err == nil {
			err = r.store.WaitFor(ctx, seq)
		}
		return seq, err
	}
}

// Every indexed file gets one vector; an edit re-embeds that file alone,
// and a hybrid search finds files by their vectors.
func TestEmbedIndexedFiles(t *testing.T) {
	r, srv, e, rec := embedRig(t)
	dir := t.TempDir()
	g, err := GenerateTree(dir, 40, 7)
	if err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	r.scan(ix)
	rep, err := ix.Embed(r.ctx, r.store, e, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != len(g.Files) || rep.Sent != len(g.Files) {
		t.Fatalf("first pass: %+v for %d files", rep, len(g.Files))
	}
	if rep, _ := ix.Embed(r.ctx, r.store, e, rec); rep.Sent != 0 || rep.Files != len(g.Files) {
		t.Fatalf("second pass asked again: %+v", rep)
	}

	// The file edited: the first (by name) whose function another file calls.
	edited, editedName := "", ""
	for _, name := range slices.Sorted(maps.Keys(g.Defines)) {
		if file := g.Defines[name]; slices.ContainsFunc(g.Callers[name], func(p string) bool { return p != file }) {
			edited, editedName = file, name
			break
		}
	}
	if err := os.WriteFile(filepath.Join(dir, edited), []byte("package gen\n\n// quokka habitat survey\nfunc "+editedName+"() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.scan(ix)
	calls := srv.EmbedCalls()
	if rep, _ := ix.Embed(r.ctx, r.store, e, rec); rep.Sent != 1 {
		t.Fatalf("after one edit: %+v, want one file sent", rep)
	}
	if got := srv.EmbedRequests()[calls].Input; len(got) != 1 || !strings.HasPrefix(got[0], edited+"\n") {
		t.Fatalf("sent %q, want %s alone", got, edited)
	}

	q := "quokka habitat"
	res, err := r.store.Code(r.ctx, projections.CodeQuery{Root: ix.Root, Kind: projections.CodeSearch, Text: q, Limit: 3,
		Embedding: &projections.CodeEmbedding{Model: e.Model(), Vector: llmtest.Vector(q, llmtest.DefaultEmbedDims)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ranking != projections.RankHybrid || res.Vectors != len(g.Files) || len(res.Hits) == 0 || res.Hits[0].Path != edited || res.Hits[0].Similarity <= 0 {
		t.Fatalf("hybrid search for %q: %+v, want %s first", q, res, edited)
	}

	// The call graph around the best hit: every file calling the function
	// it declares scores on the graph as the first seed's neighbour.
	callers := slices.DeleteFunc(slices.Clone(g.Callers[editedName]), func(p string) bool { return p == edited })
	res, err = r.store.Code(r.ctx, projections.CodeQuery{Root: ix.Root, Kind: projections.CodeSearch, Text: q, Limit: 100,
		Embedding: &projections.CodeEmbedding{Model: e.Model(), Vector: llmtest.Vector(q, llmtest.DefaultEmbedDims)}})
	if err != nil {
		t.Fatal(err)
	}
	graph := map[string]float64{}
	for _, h := range res.Hits {
		graph[h.Path] = h.Graph
	}
	for _, c := range callers {
		if graph[c] < 1 {
			t.Errorf("%s calls %s (in %s, the best hit) but scores %v on the graph", c, editedName, edited, graph[c])
		}
	}
}

// A failing endpoint is an error naming the failure, and nothing is recorded.
func TestEmbedEndpointFails(t *testing.T) {
	r, srv, e, rec := embedRig(t)
	dir := t.TempDir()
	if _, err := GenerateTree(dir, 5, 1); err != nil {
		t.Fatal(err)
	}
	ix := indexer(t, dir)
	r.scan(ix)
	srv.ScriptEmbeddings(llmtest.EmbedReply{Status: 500})
	if _, err := ix.Embed(r.ctx, r.store, e, rec); err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("a failing endpoint: %v", err)
	}
	if rep, err := ix.Embed(r.ctx, r.store, e, rec); err != nil || rep.Sent != 6 {
		t.Fatalf("the next pass sends every file again (none was recorded): %+v, %v", rep, err)
	}
}

// The indexer's embedding hash is the hash of EmbedText, for a short text
// and for one cut inside a multi-byte character.
func TestEmbedHashIsTheTextHash(t *testing.T) {
	long := strings.Repeat("é", EmbedTextBytes)
	for _, text := range []string{"", "package main\n", long, "x" + long} {
		if got, want := embedHash("a/b.go", text, new([]byte)), schemas.TextHash(EmbedText("a/b.go", text)); got != want {
			t.Errorf("%d bytes: %s, want %s", len(text), got, want)
		}
	}
}
