package projections

import (
	"encoding/binary"
	"fmt"

	"github.com/sylk/sylk/schemas"
)

// The knowledge graph projection: graph_update events folded into nodes
// (graph/n), each edge under its source (graph/o, the edge's record) and
// its target (graph/i, empty: the record is read from graph/o), an index
// of the nodes by domain and type (graph/t), what a search reads of each
// node (graph/w: its terms' postings, each with the node's label; graph/e:
// the embed hash of its text and its label, the listing its vector is
// found by), the nodes by the path they are in (graph/p: what a code
// search joins its files to the graph by) and the totals BM25 needs
// (graph/z). A node's label is its
// domain and type, and whether it is superseded, so a search's filters are
// applied inside the lexical and the vector search. A graph_update is
// applied whole or refused whole: an edge to a node the graph does not
// hold, a supersession of a node already superseded, refuse it.

// GraphNodeRec is a node as the projection keeps it: the node, its trust
// resolved, where it was recorded, and its supersession.
type GraphNodeRec struct {
	schemas.GraphNode
	// Agent is the source of the event that recorded the node; Seq its
	// stream sequence (provenance of the record itself).
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"`
	// SupersededBy is the node that supersedes this one, at SupersededSeq.
	SupersededBy    string `json:"superseded_by,omitempty"`
	SupersedeReason string `json:"supersede_reason,omitempty"`
	SupersededSeq   uint64 `json:"superseded_seq,omitempty"`
}

// GraphEdgeRec is an edge as the projection keeps it.
type GraphEdgeRec struct {
	schemas.GraphEdge
	Agent string `json:"agent"`
	Seq   uint64 `json:"seq"`
}

// graphTotals are what BM25 needs of all the nodes, and the last update
// applied (what an in-memory vector index is up to date with).
type graphTotals struct {
	Nodes  int    `json:"nodes"`
	Length int64  `json:"length"`
	Seq    uint64 `json:"seq"`
}

// GraphEmbedText is the text a node's vector is made from (seed L29185:
// its name and content).
func GraphEmbedText(n *schemas.GraphNode) string { return n.Name + "\n" + n.Content }

// graphLabel is the label of n's postings and vector: its domain and type,
// and "/superseded" when it is.
func graphLabel(n *GraphNodeRec) string {
	l := n.Domain + "/" + n.Type
	if n.SupersededBy != "" {
		l += graphSupersededLabel
	}
	return l
}

const graphSupersededLabel = "/superseded"

// graphTermCounts are the search terms of n: its name, path and content.
func graphTermCounts(n *GraphNodeRec) (map[string]int, int) {
	counts := TermCounts(n.Name + "\n" + n.Path + "\n" + n.Content)
	length := 0
	for term, c := range counts {
		if validTerm(term) {
			length += c
		} else {
			delete(counts, term)
		}
	}
	return counts, length
}

// putGraphText writes what a search reads of n: its postings and its
// vector's listing.
func putGraphText(t *tx, n *GraphNodeRec, tot *graphTotals) error {
	counts, length := graphTermCounts(n)
	label := graphLabel(n)
	for term, c := range counts {
		v := binary.AppendUvarint(nil, uint64(c))
		v = binary.AppendUvarint(v, uint64(length))
		if err := t.set(graphTermKey(term, n.ID), append(v, label...)); err != nil {
			return err
		}
	}
	tot.Nodes++
	tot.Length += int64(length)
	if n.Path != "" {
		if err := t.set(graphPathKey(n.Path, n.ID), nil); err != nil {
			return err
		}
	}
	return t.set(graphEmbedKey(n.ID), vectorListing(schemas.TextHash(GraphEmbedText(&n.GraphNode)), label))
}

// dropGraphText deletes what putGraphText wrote of n.
func dropGraphText(t *tx, n *GraphNodeRec, tot *graphTotals) error {
	counts, length := graphTermCounts(n)
	for term := range counts {
		if err := t.batch.Delete(graphTermKey(term, n.ID), nil); err != nil {
			return err
		}
	}
	tot.Nodes--
	tot.Length -= int64(length)
	if n.Path != "" {
		if err := t.batch.Delete(graphPathKey(n.Path, n.ID), nil); err != nil {
			return err
		}
	}
	return t.batch.Delete(graphEmbedKey(n.ID), nil)
}

func graphNodeKey(id string) []byte              { return key("graph/n/", id) }
func graphTermPrefix(term string) []byte         { return under(key("graph/w/", term)) }
func graphTermKey(term, id string) []byte        { return key("graph/w/", term, id) }
func graphEmbedKey(id string) []byte             { return key("graph/e/", id) }
func graphPathKey(pth, id string) []byte         { return key("graph/p/", pth, id) }
func graphPathPrefix(pth string) []byte          { return under(key("graph/p/", pth)) }
func graphEmbedsPrefix() []byte                  { return []byte("graph/e/") }
func graphTotalsKey() []byte                     { return []byte("graph/z") }
func graphOutKey(from, typ, to string) []byte    { return key("graph/o/", from, typ, to) }
func graphInKey(to, typ, from string) []byte     { return key("graph/i/", to, typ, from) }
func graphTypeKey(domain, typ, id string) []byte { return key("graph/t/", domain, typ, id) }

func applyGraph(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.Type != schemas.TypeGraphUpdate {
		return nil
	}
	u, err := payloadOf[schemas.GraphUpdate](t, Graph, ev)
	if u == nil {
		return err
	}
	if err := u.Check(); err != nil {
		return t.reject(Graph, ev, "%v", err)
	}
	reason, err := graphRefusal(t, u)
	if err != nil {
		return err
	}
	if reason != "" {
		return t.reject(Graph, ev, "%s", reason)
	}
	tot, err := load[graphTotals](t, graphTotalsKey())
	if err != nil {
		return err
	}
	if tot == nil {
		tot = &graphTotals{}
	}
	tot.Seq = ev.seq
	store(t, graphTotalsKey(), tot)
	for _, n := range u.Nodes {
		old, err := load[GraphNodeRec](t, graphNodeKey(n.ID))
		if err != nil {
			return err
		}
		rec := &GraphNodeRec{GraphNode: n, Agent: env.Source, Seq: ev.seq}
		rec.Trust = n.TrustOf()
		if old != nil {
			// A node recorded again keeps its supersession.
			rec.SupersededBy, rec.SupersedeReason, rec.SupersededSeq = old.SupersededBy, old.SupersedeReason, old.SupersededSeq
			if err := t.batch.Delete(graphTypeKey(old.Domain, old.Type, n.ID), nil); err != nil {
				return err
			}
			if err := dropGraphText(t, old, tot); err != nil {
				return err
			}
		}
		if err := putGraphText(t, rec, tot); err != nil {
			return err
		}
		store(t, graphNodeKey(n.ID), rec)
		if err := t.set(graphTypeKey(n.Domain, n.Type, n.ID), nil); err != nil {
			return err
		}
	}
	for _, r := range u.RemoveEdges {
		store[GraphEdgeRec](t, graphOutKey(r.From, r.Type, r.To), nil)
		if err := t.batch.Delete(graphInKey(r.To, r.Type, r.From), nil); err != nil {
			return err
		}
	}
	for _, e := range u.Edges {
		rec := &GraphEdgeRec{GraphEdge: e, Agent: env.Source, Seq: ev.seq}
		if rec.Weight == 0 {
			rec.Weight = 1
		}
		rec.Trust = e.TrustOf()
		if err := putGraphEdge(t, rec); err != nil {
			return err
		}
	}
	for _, s := range u.Supersede {
		old, err := load[GraphNodeRec](t, graphNodeKey(s.Old))
		if err != nil {
			return err
		}
		cp := *old
		cp.SupersededBy, cp.SupersedeReason, cp.SupersededSeq = s.New, s.Reason, ev.seq
		// Its label changes: its postings and listing are written again.
		if err := dropGraphText(t, old, tot); err != nil {
			return err
		}
		if err := putGraphText(t, &cp, tot); err != nil {
			return err
		}
		store(t, graphNodeKey(s.Old), &cp)
		e := &GraphEdgeRec{Agent: env.Source, Seq: ev.seq}
		e.From, e.Type, e.To, e.Weight = s.New, schemas.EdgeSupersedes, s.Old, 1
		e.Source = "user"
		if nn, err := load[GraphNodeRec](t, graphNodeKey(s.New)); err == nil && nn != nil {
			e.Source, e.Trust = nn.Source, nn.Trust
		}
		e.Trust = e.TrustOf()
		if err := putGraphEdge(t, e); err != nil {
			return err
		}
	}
	return nil
}

func putGraphEdge(t *tx, e *GraphEdgeRec) error {
	store(t, graphOutKey(e.From, e.Type, e.To), e)
	return t.set(graphInKey(e.To, e.Type, e.From), nil)
}

// graphRefusal is why u cannot be applied to the graph as it is, or "":
// an edge or a supersession naming a node neither the graph nor u holds, a
// node superseded twice.
func graphRefusal(t *tx, u *schemas.GraphUpdate) (string, error) {
	adds := map[string]bool{}
	for _, n := range u.Nodes {
		adds[n.ID] = true
	}
	known := func(id string) (*GraphNodeRec, bool, error) {
		n, err := load[GraphNodeRec](t, graphNodeKey(id))
		return n, n != nil || adds[id], err
	}
	for _, e := range u.Edges {
		for _, id := range []string{e.From, e.To} {
			if _, ok, err := known(id); err != nil || !ok {
				return fmt.Sprintf("edge %s -%s-> %s: node %q is not in the graph (add it first, or in the same update)", e.From, e.Type, e.To, id), err
			}
		}
	}
	superseded := map[string]bool{}
	for _, s := range u.Supersede {
		for _, id := range []string{s.Old, s.New} {
			if _, ok, err := known(id); err != nil || !ok {
				return fmt.Sprintf("supersession of %q by %q: node %q is not in the graph", s.Old, s.New, id), err
			}
		}
		n, _, err := known(s.Old)
		if err != nil {
			return "", err
		}
		switch {
		case superseded[s.Old]:
			return fmt.Sprintf("node %q is superseded twice in one update", s.Old), nil
		case n != nil && n.SupersededBy != "":
			return fmt.Sprintf("node %q is already superseded by %q (at seq %d)", s.Old, n.SupersededBy, n.SupersededSeq), nil
		}
		superseded[s.Old] = true
	}
	return "", nil
}
