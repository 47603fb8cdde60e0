package projections

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Graph query kinds.
const (
	GraphNode     = "node"     // one node and its edges
	GraphNodes    = "nodes"    // the nodes of a domain and types
	GraphTraverse = "traverse" // the nodes reachable from one, best first
	GraphSearch   = "search"   // the nodes Text finds: lexical, vector and graph ranks fused
	GraphEmbeds   = "embeds"   // id -> embed hash of every node; with IDs their texts too
)

var graphKinds = []string{GraphNode, GraphNodes, GraphTraverse, GraphSearch, GraphEmbeds}

// RankLexicalGraph is how a graph search without an embedding ranks: BM25
// and the graph's ranking fused.
const RankLexicalGraph = "bm25+graph"

// Directions an edge is followed in.
const (
	GraphOut  = "out"
	GraphIn   = "in"
	GraphBoth = "both"
)

// Bounds of a graph query.
const (
	DefaultGraphLimit = 50
	MaxGraphLimit     = 1000
	DefaultGraphDepth = 2
	MaxGraphDepth     = 5
)

// GraphQuery asks the knowledge graph.
type GraphQuery struct {
	Kind string `json:"kind"`
	// ID is the node of a node query, the start of a traversal.
	ID string `json:"id,omitempty"`
	// Domain and NodeTypes keep the nodes a nodes query lists and a
	// traversal reports (a traversal goes through nodes of any type).
	Domain    string   `json:"domain,omitempty"`
	NodeTypes []string `json:"node_types,omitempty"`
	// EdgeTypes keep the edges listed and followed (none: all).
	EdgeTypes []string `json:"edge_types,omitempty"`
	// Direction: out, in or both (a node query: both; a traversal: out).
	Direction string `json:"direction,omitempty"`
	// Depth bounds a traversal's hops (0: DefaultGraphDepth).
	Depth int `json:"depth,omitempty"`
	// MinWeight leaves out edges lighter than it.
	MinWeight float64 `json:"min_weight,omitempty"`
	// Superseded: traverse, list and find superseded nodes too.
	Superseded bool `json:"superseded,omitempty"`
	Limit      int  `json:"limit,omitempty"`
	// Text is what a search looks for; Embedding, the vector of Text, adds
	// the vector ranking.
	Text      string         `json:"text,omitempty"`
	Embedding *CodeEmbedding `json:"embedding,omitempty"`
	// IDs are the nodes whose embed texts an embeds query returns.
	IDs []string `json:"ids,omitempty"`
}

// Validate reports what is wrong with q, wrapping ErrInvalidQuery.
func (q *GraphQuery) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: graph: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
	}
	switch {
	case !slices.Contains(graphKinds, q.Kind):
		return bad("kind %q is not one of %s", q.Kind, strings.Join(graphKinds, ", "))
	case (q.Kind == GraphNode || q.Kind == GraphTraverse) && q.ID == "":
		return bad("a %s query needs a node id", q.Kind)
	case q.Kind == GraphSearch && strings.TrimSpace(q.Text) == "":
		return bad("a search needs text")
	case q.Embedding != nil && q.Kind != GraphSearch:
		return bad("an embedding goes with a search, not a %s query", q.Kind)
	case q.Embedding != nil && (q.Embedding.Model == "" || len(q.Embedding.Vector) == 0):
		return bad("the embedding needs its model and its vector")
	case len(q.IDs) > 0 && q.Kind != GraphEmbeds:
		return bad("ids go with an embeds query, not a %s query", q.Kind)
	case len(q.IDs) > MaxEmbeddingKeys:
		return bad("%d ids, at most %d a query", len(q.IDs), MaxEmbeddingKeys)
	case q.Domain != "" && schemas.GraphNodeTypes[q.Domain] == nil:
		return bad("domain %q is not one of code, history, academic", q.Domain)
	case q.Direction != "" && q.Direction != GraphOut && q.Direction != GraphIn && q.Direction != GraphBoth:
		return bad("direction %q is not out, in or both", q.Direction)
	case q.Depth < 0 || q.Depth > MaxGraphDepth:
		return bad("depth %d is not in 1-%d", q.Depth, MaxGraphDepth)
	case q.Limit < 0 || q.Limit > MaxGraphLimit:
		return bad("limit %d is not in 1-%d", q.Limit, MaxGraphLimit)
	case q.MinWeight < 0 || q.MinWeight > 1:
		return bad("min weight %v is not in 0-1", q.MinWeight)
	}
	for _, t := range q.NodeTypes {
		d := graphDomainOf(t)
		switch {
		case d == "":
			return bad("node type %q is not one of %s", t, strings.Join(allGraphNodeTypes(), ", "))
		case q.Domain != "" && d != q.Domain:
			return bad("node type %q is of the %s domain, not %s", t, d, q.Domain)
		}
	}
	for _, t := range q.EdgeTypes {
		if !slices.Contains(schemas.GraphEdgeTypes, t) {
			return bad("edge type %q is not one of %s", t, strings.Join(schemas.GraphEdgeTypes, ", "))
		}
	}
	return nil
}

// graphDomainOf is the domain of node type t, "" if none has it.
func graphDomainOf(t string) string {
	for d, ts := range schemas.GraphNodeTypes {
		if slices.Contains(ts, t) {
			return d
		}
	}
	return ""
}

func allGraphNodeTypes() []string {
	var out []string
	for _, d := range []string{schemas.DomainCode, schemas.DomainHistory, schemas.DomainAcademic} {
		out = append(out, schemas.GraphNodeTypes[d]...)
	}
	return out
}

// GraphResult answers a GraphQuery; the fields of its kind are set.
type GraphResult struct {
	// Node and Edges answer a node query (Node nil: no such node).
	Node  *GraphNodeRec   `json:"node,omitempty"`
	Edges []GraphEdgeInfo `json:"edges,omitempty"`
	// Nodes answer a nodes query (by id) and a traversal (best first).
	Nodes []GraphHit `json:"nodes,omitempty"`
	// Hits answer a search, best first; Ranking says how it ranked
	// (RankLexicalGraph, or RankHybrid with an embedding), Vectors how many
	// nodes had a vector of the embedding's model, Unknown the query's words
	// no node holds.
	Hits    []GraphSearchHit `json:"hits,omitempty"`
	Ranking string           `json:"ranking,omitempty"`
	Vectors int              `json:"vectors,omitempty"`
	Unknown []string         `json:"unknown,omitempty"`
	// Embeds (an embeds query) is each node's embed hash (by id), Texts the
	// embed texts of the IDs asked for.
	Embeds map[string]string `json:"embeds,omitempty"`
	Texts  map[string]string `json:"texts,omitempty"`
}

// GraphSearchHit is a node a search found and its scores: Score the fused
// one (reciprocal rank fusion of the three rankings), Lexical its BM25
// score, Similarity the cosine similarity of its vector to the query's,
// and Graph its graph score: over the search's best hits (the seeds), the
// sum of the best path's weight from the seed (the product of its edges'
// weights) times the node's trust over 100, divided by 1 + the seed's
// rank. Superseded nodes are passed through by no path. Via is the path of
// the largest share (the seed first) and the edge type of each hop.
type GraphSearchHit struct {
	Node       GraphNodeRec `json:"node"`
	Score      float64      `json:"score"`
	Lexical    float64      `json:"lexical"`
	Similarity float64      `json:"similarity"`
	Graph      float64      `json:"graph"`
	Path       []string     `json:"path,omitempty"`
	Via        []string     `json:"via,omitempty"`
}

// GraphEdgeInfo is an edge of a node, and which way it goes from it.
type GraphEdgeInfo struct {
	GraphEdgeRec
	Direction string `json:"direction"`
}

// GraphHit is a node a query found. For a traversal: how many hops away,
// the path's score (the product of its edges' weights, times the node's
// trust over 100) and the path (the ids from the start, and the edge type
// of each hop).
type GraphHit struct {
	Node  GraphNodeRec `json:"node"`
	Depth int          `json:"depth,omitempty"`
	Score float64      `json:"score,omitempty"`
	Path  []string     `json:"path,omitempty"`
	Via   []string     `json:"via,omitempty"`
}

// Graph answers q from the knowledge graph projection.
func (s *Store) Graph(ctx context.Context, q GraphQuery) (*GraphResult, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	q.Limit = cmp.Or(q.Limit, DefaultGraphLimit)
	q.Depth = cmp.Or(q.Depth, DefaultGraphDepth)
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	out := &GraphResult{}
	switch q.Kind {
	case GraphNode:
		q.Direction = cmp.Or(q.Direction, GraphBoth)
		if out.Node, err = readJSON[GraphNodeRec](snap, graphNodeKey(q.ID)); err != nil || out.Node == nil {
			return out, err
		}
		err = graphEdges(snap, &q, q.ID, func(e GraphEdgeInfo) error {
			out.Edges = append(out.Edges, e)
			return nil
		})
	case GraphNodes:
		err = graphNodes(snap, &q, out)
	case GraphTraverse:
		q.Direction = cmp.Or(q.Direction, GraphOut)
		err = graphTraverse(ctx, snap, &q, out)
	case GraphSearch:
		q.Direction = cmp.Or(q.Direction, GraphBoth)
		err = s.graphSearch(ctx, snap, &q, out)
	case GraphEmbeds:
		err = graphEmbeds(snap, &q, out)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// keeps says whether q reports node n.
func (q *GraphQuery) keeps(n *GraphNodeRec) bool {
	return (q.Domain == "" || n.Domain == q.Domain) &&
		(len(q.NodeTypes) == 0 || slices.Contains(q.NodeTypes, n.Type)) &&
		(q.Superseded || n.SupersededBy == "")
}

func graphNodes(r pebble.Reader, q *GraphQuery, out *GraphResult) error {
	var prefixes [][]byte
	switch {
	case len(q.NodeTypes) > 0:
		for _, t := range q.NodeTypes {
			prefixes = append(prefixes, under(key("graph/t/", graphDomainOf(t), t)))
		}
	case q.Domain != "":
		prefixes = append(prefixes, under(key("graph/t/", q.Domain)))
	default:
		prefixes = append(prefixes, []byte("graph/t/"))
	}
	var ids []string
	for _, p := range prefixes {
		err := scanPrefix(r, p, func(k, _ []byte) error {
			ids = append(ids, string(k[bytes.LastIndexByte(k, sep)+1:]))
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		n, err := readJSON[GraphNodeRec](r, graphNodeKey(id))
		if err != nil {
			return err
		}
		if n != nil && q.keeps(n) {
			out.Nodes = append(out.Nodes, GraphHit{Node: *n})
			if len(out.Nodes) == q.Limit {
				break
			}
		}
	}
	return nil
}

// graphEdges calls fn with the edges of node id that q follows: of its
// types, its direction and at least its minimum weight, out then in, each
// by type then by the other end.
func graphEdges(r pebble.Reader, q *GraphQuery, id string, fn func(GraphEdgeInfo) error) error {
	types := q.EdgeTypes
	if len(types) == 0 {
		types = []string{""}
	}
	emit := func(dir string, e *GraphEdgeRec) error {
		if e == nil || e.Weight < q.MinWeight {
			return nil
		}
		return fn(GraphEdgeInfo{GraphEdgeRec: *e, Direction: dir})
	}
	if q.Direction != GraphIn {
		for _, t := range types {
			err := scanPrefix(r, graphPrefix("graph/o/", id, t), func(_, v []byte) error {
				var e GraphEdgeRec
				if err := json.Unmarshal(v, &e); err != nil {
					return err
				}
				return emit(GraphOut, &e)
			})
			if err != nil {
				return err
			}
		}
	}
	if q.Direction != GraphOut {
		for _, t := range types {
			err := scanPrefix(r, graphPrefix("graph/i/", id, t), func(k, _ []byte) error {
				parts := bytes.Split(k[len("graph/i/"):], []byte{sep})
				if len(parts) != 3 {
					return fmt.Errorf("graph: malformed key %q", k)
				}
				e, err := readJSON[GraphEdgeRec](r, graphOutKey(string(parts[2]), string(parts[1]), id))
				if err != nil {
					return err
				}
				return emit(GraphIn, e)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// graphPrefix is the prefix of the edge keys of id (of type t, "": all).
func graphPrefix(p, id, t string) []byte {
	if t == "" {
		return under(key(p, id))
	}
	return under(key(p, id, t))
}

// graphTraverse walks the graph from q.ID breadth first up to q.Depth hops
// along the edges q follows, never through a superseded node unless asked;
// each node is reported once, at its fewest hops, with the best path
// there.
func graphTraverse(ctx context.Context, r pebble.Reader, q *GraphQuery, out *GraphResult) error {
	start, err := readJSON[GraphNodeRec](r, graphNodeKey(q.ID))
	if err != nil || start == nil {
		return err
	}
	type reach struct {
		node   *GraphNodeRec
		weight float64
		path   []string
		via    []string
	}
	seen := map[string]bool{q.ID: true}
	frontier := []*reach{{node: start, weight: 1, path: []string{q.ID}}}
	for depth := 1; depth <= q.Depth && len(frontier) > 0; depth++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		next := map[string]*reach{}
		for _, f := range frontier {
			err := graphEdges(r, q, f.node.ID, func(e GraphEdgeInfo) error {
				other := e.To
				if e.Direction == GraphIn {
					other = e.From
				}
				if seen[other] {
					return nil
				}
				w := f.weight * e.Weight
				if cur := next[other]; cur != nil && cur.weight >= w {
					return nil
				}
				var n *GraphNodeRec
				if cur := next[other]; cur != nil {
					n = cur.node
				} else {
					var err error
					if n, err = readJSON[GraphNodeRec](r, graphNodeKey(other)); err != nil || n == nil {
						return err
					}
				}
				if n.SupersededBy != "" && !q.Superseded {
					return nil
				}
				next[other] = &reach{node: n, weight: w, path: append(slices.Clip(f.path), other), via: append(slices.Clip(f.via), e.Type)}
				return nil
			})
			if err != nil {
				return err
			}
		}
		frontier = frontier[:0]
		for id, rc := range next {
			seen[id] = true
			frontier = append(frontier, rc)
			if q.keeps(rc.node) {
				out.Nodes = append(out.Nodes, GraphHit{Node: *rc.node, Depth: depth, Score: rc.weight * float64(rc.node.Trust) / 100, Path: rc.path, Via: rc.via})
			}
		}
		slices.SortFunc(frontier, func(a, b *reach) int { return strings.Compare(a.node.ID, b.node.ID) })
	}
	slices.SortFunc(out.Nodes, func(a, b GraphHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Depth, b.Depth); c != 0 {
			return c
		}
		return strings.Compare(a.Node.ID, b.Node.ID)
	})
	if len(out.Nodes) > q.Limit {
		out.Nodes = out.Nodes[:q.Limit]
	}
	return nil
}
