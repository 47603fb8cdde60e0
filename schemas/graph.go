package schemas

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The knowledge graph's events (seed L28549-28696): nodes of the three
// domains (code, history, academic), typed weighted edges between them,
// each with its provenance (where the knowledge came from, and how far it
// is trusted), and supersession (a newer node replaces an older one, which
// stays readable but leaves traversals). The graph projection is folded
// from these events alone.
const (
	TypeGraphUpdate Type = "graph_update"
)

var graphTypes = map[Type]typeInfo{
	TypeGraphUpdate: entry[GraphUpdate]("Nodes and typed weighted edges added to the knowledge graph (with provenance), edges removed, and nodes superseded by newer ones."),
}

// Knowledge domains: who owns the knowledge (the Librarian the code, the
// Archivalist the history, the Academic outside knowledge).
const (
	DomainCode     = "code"
	DomainHistory  = "history"
	DomainAcademic = "academic"
)

// GraphNodeTypes lists the node types of each domain.
var GraphNodeTypes = map[string][]string{
	DomainCode:     {"file", "package", "function", "method", "struct", "interface", "variable", "constant", "import"},
	DomainHistory:  {"history_entry", "session", "workflow", "outcome", "decision"},
	DomainAcademic: {"paper", "documentation", "best_practice", "rfc", "stack_overflow", "blog_post", "tutorial"},
}

// EdgeSupersedes is the edge a supersession adds from the newer node to
// the older; it is not added as a plain edge.
const EdgeSupersedes = "supersedes"

// GraphEdgeTypes lists the edge types: code structure, history,
// cross-domain and academic.
var GraphEdgeTypes = []string{
	"calls", "called_by", "imports", "imported_by", "implements", "implemented_by",
	"embeds", "has_field", "has_method", "defines", "defined_in", "returns", "receives",
	"produced_by", "resulted_in", "similar_to", "followed_by", EdgeSupersedes,
	"modified", "created", "deleted", "based_on", "references", "validated_by",
	"documents", "uses_library", "implements_pattern",
	"cites", "related_to",
}

// Provenance sources, and the trust each is given when a node or edge
// says none (seed L28677: current code is the ground truth, an LLM's
// inference the least trusted).
var GraphSources = map[string]int{
	"code":          100,
	"user":          90,
	"history":       80,
	"academic":      60,
	"llm_inference": 20,
}

// GraphUpdate changes the knowledge graph. Within one event nodes are added
// first, then edges removed, edges added, and supersessions applied, so an
// edge may join nodes the same event adds. The event is applied whole or
// refused whole.
type GraphUpdate struct {
	Nodes       []GraphNode      `json:"nodes,omitempty"`
	RemoveEdges []GraphEdgeRef   `json:"remove_edges,omitempty"`
	Edges       []GraphEdge      `json:"edges,omitempty"`
	Supersede   []GraphSupersede `json:"supersede,omitempty"`
}

// Provenance says where a node or an edge came from.
type Provenance struct {
	// Source is one of GraphSources's keys.
	Source string `json:"source"`
	// Ref points at the evidence: a path (and line), a URL, an event id.
	Ref string `json:"ref,omitempty"`
	// Trust is 1-100; 0 takes the source's default.
	Trust int `json:"trust,omitempty"`
}

// GraphNode is a node added, or replaced whole when its id is known.
type GraphNode struct {
	// ID names the node across domains ("code:projections.Store.Code");
	// no NUL, at most 512 bytes.
	ID     string `json:"id"`
	Domain string `json:"domain"`
	// Type is one of GraphNodeTypes[Domain].
	Type    string `json:"type"`
	Name    string `json:"name"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Content string `json:"content,omitempty"`
	Provenance
}

// GraphEdgeRef names an edge: its two ends and its type.
type GraphEdgeRef struct {
	From string `json:"from"`
	Type string `json:"type"`
	To   string `json:"to"`
}

// GraphEdge is a typed, weighted edge; one of the same ends and type is
// replaced.
type GraphEdge struct {
	GraphEdgeRef
	// Weight is in (0, 1]; 0 means 1.
	Weight float64 `json:"weight,omitempty"`
	Provenance
}

// GraphSupersede says node New supersedes node Old (a newer decision, a
// fixed approach, a rewritten function): Old keeps its edges and stays
// readable, marked superseded, and traversals leave it out unless asked.
type GraphSupersede struct {
	Old    string `json:"old"`
	New    string `json:"new"`
	Reason string `json:"reason,omitempty"`
}

// MaxGraphIDLen bounds a node id.
const MaxGraphIDLen = 512

// Check reports the first thing wrong with u that needs no graph to see,
// naming the item and the field.
func (u *GraphUpdate) Check() error {
	if len(u.Nodes)+len(u.Edges)+len(u.RemoveEdges)+len(u.Supersede) == 0 {
		return fmt.Errorf("graph update: no nodes, edges or supersessions")
	}
	for i, n := range u.Nodes {
		at := fmt.Sprintf("node %d (%q)", i, n.ID)
		if err := checkGraphID(at+": id", n.ID); err != nil {
			return err
		}
		types, ok := GraphNodeTypes[n.Domain]
		if !ok {
			return fmt.Errorf("%s: domain %q is not one of code, history, academic", at, n.Domain)
		}
		if !slices.Contains(types, n.Type) {
			return fmt.Errorf("%s: type %q is not a %s node type (%s)", at, n.Type, n.Domain, strings.Join(types, ", "))
		}
		if strings.TrimSpace(n.Name) == "" {
			return fmt.Errorf("%s: the name is empty", at)
		}
		if err := n.Provenance.check(at); err != nil {
			return err
		}
	}
	for i, e := range u.Edges {
		at := fmt.Sprintf("edge %d (%s -%s-> %s)", i, e.From, e.Type, e.To)
		if err := e.GraphEdgeRef.check(at); err != nil {
			return err
		}
		if e.Type == EdgeSupersedes {
			return fmt.Errorf("%s: a supersedes edge is made by a supersession (supersede), not added", at)
		}
		if math.IsNaN(e.Weight) || e.Weight < 0 || e.Weight > 1 {
			return fmt.Errorf("%s: weight %v is not in (0, 1]", at, e.Weight)
		}
		if err := e.Provenance.check(at); err != nil {
			return err
		}
	}
	for i, e := range u.RemoveEdges {
		if err := e.check(fmt.Sprintf("removed edge %d (%s -%s-> %s)", i, e.From, e.Type, e.To)); err != nil {
			return err
		}
	}
	for i, s := range u.Supersede {
		at := fmt.Sprintf("supersession %d", i)
		if err := checkGraphID(at+": old", s.Old); err != nil {
			return err
		}
		if err := checkGraphID(at+": new", s.New); err != nil {
			return err
		}
		if s.Old == s.New {
			return fmt.Errorf("%s: node %q cannot supersede itself", at, s.Old)
		}
	}
	return nil
}

func (r GraphEdgeRef) check(at string) error {
	if err := checkGraphID(at+": from", r.From); err != nil {
		return err
	}
	if err := checkGraphID(at+": to", r.To); err != nil {
		return err
	}
	if !slices.Contains(GraphEdgeTypes, r.Type) {
		return fmt.Errorf("%s: edge type %q is not one of %s", at, r.Type, strings.Join(GraphEdgeTypes, ", "))
	}
	return nil
}

func (p Provenance) check(at string) error {
	if _, ok := GraphSources[p.Source]; !ok {
		return fmt.Errorf("%s: provenance source %q is not one of code, user, history, academic, llm_inference", at, p.Source)
	}
	if p.Trust < 0 || p.Trust > 100 {
		return fmt.Errorf("%s: trust %d is not in 1-100 (0: the source's default)", at, p.Trust)
	}
	return nil
}

// TrustOf is p's trust, its source's default when it says none.
func (p Provenance) TrustOf() int {
	if p.Trust > 0 {
		return p.Trust
	}
	return GraphSources[p.Source]
}

func checkGraphID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%s is empty", what)
	case len(id) > MaxGraphIDLen:
		return fmt.Errorf("%s is %d bytes, at most %d", what, len(id), MaxGraphIDLen)
	case strings.ContainsRune(id, 0):
		return fmt.Errorf("%s %q holds a NUL byte", what, id)
	}
	return nil
}
