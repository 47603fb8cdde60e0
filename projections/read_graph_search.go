package projections

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// A search of the knowledge graph ranks its nodes three ways and fuses the
// rankings by reciprocal rank, as a hybrid code search does:
//
//   - lexical: BM25 over each node's name, path and content;
//   - vector: the cosine similarity of each node's vector (of its name and
//     content, recorded as an embedding event) to the query's;
//   - graph: the weighted neighbourhood, in the graph itself, of the best
//     hits of the other two (the seeds): each node reached from a seed
//     within the query's depth scores the best path's weight times its own
//     trust over 100, divided by 1 + the seed's rank, summed over the
//     seeds. Paths never pass through a superseded node.
//
// The domain and type filters (and superseded nodes, left out unless
// asked) are applied inside the lexical and the vector search: each
// posting and each vector carries its node's label. The seeds are taken
// from every live node, whatever the filter, so a history decision found
// through the code it modified ranks in a search of decisions.

// keepsLabel says whether q reports a node of label (graphLabel).
func (q *GraphQuery) keepsLabel(label string) bool {
	rest, superseded := strings.CutSuffix(label, graphSupersededLabel)
	d, t, _ := strings.Cut(rest, "/")
	return (q.Domain == "" || d == q.Domain) && (len(q.NodeTypes) == 0 || slices.Contains(q.NodeTypes, t)) &&
		(q.Superseded || !superseded)
}

func (s *Store) graphSearch(ctx context.Context, r pebble.Reader, q *GraphQuery, out *GraphResult) error {
	terms, err := queryTerms("graph", q.Text)
	if err != nil {
		return err
	}
	out.Ranking = RankLexicalGraph
	if q.Embedding != nil {
		out.Ranking = RankHybrid
	}
	tot, err := readJSON[graphTotals](r, graphTotalsKey())
	if err != nil || tot == nil {
		return err
	}
	depth := max(5*q.Limit, 50)
	seedsOf := &GraphQuery{Superseded: q.Superseded}
	filtered := q.Domain != "" || len(q.NodeTypes) > 0
	rank := func(f *GraphQuery) (lexical []CodeHit, near []vectorHit, err error) {
		if lexical, out.Unknown, err = graphLexical(r, terms, tot, f.keepsLabel); err != nil {
			return nil, nil, err
		}
		if q.Embedding != nil {
			if near, out.Vectors, err = s.vectors.nearest(r, graphEmbedsPrefix(), tot.Seq, q.Embedding, depth, f.keepsLabel); err != nil {
				return nil, nil, err
			}
		}
		return lexical[:min(len(lexical), depth)], near, nil
	}
	lexical, near, err := rank(seedsOf)
	if err != nil {
		return err
	}
	seeds := fuse(lexical, near, nil)
	seeds = seeds[:min(len(seeds), graphSeeds)]
	if filtered {
		if lexical, near, err = rank(q); err != nil {
			return err
		}
	}
	graph, paths, err := graphNeighbourhood(ctx, r, q, seeds, depth)
	if err != nil {
		return err
	}
	fused := fuse(lexical, near, graph)
	for _, h := range fused[:min(len(fused), q.Limit)] {
		n, err := readJSON[GraphNodeRec](r, graphNodeKey(h.Path))
		if err != nil {
			return err
		}
		if n == nil {
			return fmt.Errorf("graph: node %q is indexed but not recorded", h.Path)
		}
		hit := GraphSearchHit{Node: *n, Score: h.Score, Lexical: h.Lexical, Similarity: h.Similarity, Graph: h.Graph}
		if p := paths[h.Path]; p != nil {
			hit.Path, hit.Via = p.Path, p.Via
		}
		out.Hits = append(out.Hits, hit)
	}
	return nil
}

// graphLexical ranks the nodes whose labels keep accepts by BM25 over the
// query's terms, best first, and lists the terms no node holds.
func graphLexical(r pebble.Reader, terms []string, tot *graphTotals, keep func(string) bool) ([]CodeHit, []string, error) {
	avgdl := float64(tot.Length) / float64(max(tot.Nodes, 1))
	return rankBM25(terms, tot.Nodes, avgdl, func(term string, add func(posting)) error {
		prefix := graphTermPrefix(term)
		return scanPrefix(r, prefix, func(k, v []byte) error {
			p, label, err := decodePosting(prefix, k, v)
			if err == nil {
				p.drop = !keep(string(label))
				add(p)
			}
			return err
		})
	})
}

// graphNeighbourhood ranks the nodes q keeps around seeds (best first) by
// their graph score (GraphSearchHit.Graph), at most k, with the path of
// each one's largest share.
func graphNeighbourhood(ctx context.Context, r pebble.Reader, q *GraphQuery, seeds []CodeHit, k int) ([]CodeHit, map[string]*GraphHit, error) {
	score := map[string]float64{}
	best := map[string]*GraphHit{}
	share := map[string]float64{}
	for rank, s := range seeds {
		walk := *q
		walk.Kind, walk.ID, walk.Limit = GraphTraverse, s.Path, MaxGraphLimit
		res := &GraphResult{}
		if err := graphTraverse(ctx, r, &walk, res); err != nil {
			return nil, nil, err
		}
		for _, h := range res.Nodes {
			sc := h.Score / float64(1+rank)
			score[h.Node.ID] += sc
			if sc > share[h.Node.ID] {
				share[h.Node.ID], best[h.Node.ID] = sc, &h
			}
		}
	}
	hits := make([]CodeHit, 0, len(score))
	for id, sc := range score {
		hits = append(hits, CodeHit{Path: id, Score: sc})
	}
	sortHits(hits)
	return hits[:min(len(hits), k)], best, nil
}

// graphEmbeds answers an embeds query: every node's embed hash, or, with
// ids, theirs and their embed texts.
func graphEmbeds(r pebble.Reader, q *GraphQuery, out *GraphResult) error {
	if len(q.IDs) == 0 {
		m, err := readMap(r, graphEmbedsPrefix())
		for id, v := range m {
			m[id], _ = splitListing(v)
		}
		out.Embeds = m
		return err
	}
	out.Embeds, out.Texts = map[string]string{}, map[string]string{}
	for _, id := range q.IDs {
		n, err := readJSON[GraphNodeRec](r, graphNodeKey(id))
		if err != nil {
			return err
		}
		if n != nil {
			text := GraphEmbedText(&n.GraphNode)
			out.Texts[id] = text
			out.Embeds[id] = schemas.TextHash(text)
		}
	}
	return nil
}
