package projections_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/ann"
	"github.com/sylk/sylk/schemas"
)

// A graph search filtered by type gets its limit of nodes of that type from
// the vector ranking however few of the nodes they are: the filter is
// applied inside the vector search, not to its nearest few afterwards. The
// hits are the nodes an exact scan of that type's vectors finds, in order.
func TestGraphSearchFiltersInsideTheVectorSearch(t *testing.T) {
	w := newWorld(t)
	const n, papers, dims = 600, 6, 16
	g := ann.Generate(n, dims, 1, 3)
	u := schemas.GraphUpdate{}
	var lines strings.Builder
	for i := range n {
		node := schemas.GraphNode{ID: fmt.Sprintf("code:f%03d", i), Domain: "code", Type: "function", Name: fmt.Sprintf("f%03d", i), Provenance: schemas.Provenance{Source: "code"}}
		if i%(n/papers) == 0 {
			node.ID, node.Domain, node.Type = fmt.Sprintf("acad:p%03d", i), "academic", "paper"
		}
		u.Nodes = append(u.Nodes, node)
		h := schemas.TextHash(projections.GraphEmbedText(&node))
		vec, _ := json.Marshal(g.Vecs[i])
		fmt.Fprintf(&lines, "_ embedding {\"key\":%q,\"model\":\"m\",\"text_hash\":%q,\"vector\":%s}\n", schemas.EmbeddingKey("m", 0, h), h, vec)
	}
	payload, _ := json.Marshal(u)
	if out := w.appendLines("_ graph_update source=librarian " + string(payload) + "\n" + lines.String()); strings.Contains(out, "rejected") || strings.Contains(out, "error") {
		t.Fatalf("append: %s", out)
	}
	q := projections.GraphQuery{Kind: projections.GraphSearch, Text: "nothing holds this", NodeTypes: []string{"paper"}, Limit: papers,
		Embedding: &projections.CodeEmbedding{Model: "m", Vector: g.Queries[0]}}
	res, err := w.store.Graph(w.ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if res.Vectors != n || len(res.Hits) != papers {
		t.Fatalf("%d vectors, %d hits; want %d and %d", res.Vectors, len(res.Hits), n, papers)
	}
	// The exact ranking of the papers' vectors.
	best := make([]string, 0, papers)
	sims := map[string]float32{}
	for i := range n {
		if i%(n/papers) == 0 {
			id := fmt.Sprintf("acad:p%03d", i)
			sims[id] = ann.Dot(ann.Unit(g.Queries[0]), g.Vecs[i])
			best = append(best, id)
		}
	}
	for i, h := range res.Hits {
		if h.Node.Type != "paper" || h.Lexical != 0 || h.Graph != 0 {
			t.Fatalf("hit %d: %s %s lexical %v graph %v", i, h.Node.ID, h.Node.Type, h.Lexical, h.Graph)
		}
		if d := float32(h.Similarity) - sims[h.Node.ID]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("hit %s: similarity %v, the exact one %v", h.Node.ID, h.Similarity, sims[h.Node.ID])
		}
		if i > 0 && h.Similarity > res.Hits[i-1].Similarity {
			t.Fatalf("hits out of order: %s (%v) after %s (%v)", h.Node.ID, h.Similarity, res.Hits[i-1].Node.ID, res.Hits[i-1].Similarity)
		}
	}
	// Without the filter, the papers are a few of the nearest 50 at most.
	q.NodeTypes, q.Limit = nil, 50
	if res, err = w.store.Graph(w.ctx, q); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, h := range res.Hits {
		if h.Node.Type == "paper" {
			found++
		}
	}
	if found >= papers {
		t.Fatalf("all %d papers are among the nearest 50 of %d: the test does not tell a filter inside from one after", papers, n)
	}
}
