// Package graph is `sylk graph`: the knowledge graph's nodes, typed
// weighted edges and supersessions, recorded as graph_update events, and
// its reads (a node with its edges, the nodes of a type, traversal).
package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// NewCmdGraph is `sylk graph`.
func NewCmdGraph(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "graph",
		Short: "The knowledge graph: nodes, typed weighted edges, supersession, traversal",
		Long: `The knowledge graph joins what the Librarian knows of the code, what the
Archivalist remembers and what the Academic read: nodes of three domains
(code, history, academic), each of a type, joined by typed edges with a
weight in (0, 1]. Every node and edge carries its provenance: its source
(code, user, history, academic, llm_inference), a reference to the evidence
(a path, a URL, an event id) and a trust of 1-100 (the source's default when
none is given: code 100, user 90, history 80, academic 60, llm_inference 20).

A node may be superseded by a newer one (a decision replaced, an approach
that failed): it stays readable, marked, and traversals leave it out unless
--superseded. Every change is a graph_update event in the system session,
applied whole or refused whole with the reason (an edge to an unknown node,
an unknown type); the graph is a projection rebuilt from those events.

Node types: code: file package function method struct interface variable
constant import; history: history_entry session workflow outcome decision;
academic: paper documentation best_practice rfc stack_overflow blog_post
tutorial. Edge types: ` + strings.Join(schemas.GraphEdgeTypes, " ") + `.`,
		Example: `  sylk graph node code:cfg.Load --domain code --type function --name Load --ref cfg/load.go:12
  sylk graph node hist:strict --domain history --type decision --name "strict YAML" --source history
  sylk graph link hist:strict modified code:cfg.Load --weight 0.9 --source history
  sylk graph supersede hist:strict hist:lenient --reason "old configs must load"
  sylk graph traverse hist:lenient --depth 3 --type function
  sylk graph add update.json     # a whole graph_update payload (JSON; - reads stdin)`,
	}
	cmd.AddCommand(newNodeCmd(f), newLinkCmd(f), newSupersedeCmd(f), newAddCmd(f), newShowCmd(f), newListCmd(f), newTraverseCmd(f))
	return cmd
}

// record checks u, appends it as a graph_update, waits until the graph has
// applied it and says so (or why it was refused).
func record(ctx context.Context, f *cmdutil.Factory, u *schemas.GraphUpdate, asJSON bool) error {
	if err := u.Check(); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	env, err := schemas.New(schemas.TypeGraphUpdate, "_", "user", "user", f.Now(), *u)
	if err != nil {
		return err
	}
	seq, err := r.AppendApplied(ctx, env)
	if err != nil {
		return err
	}
	if asJSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "nodes": len(u.Nodes), "edges": len(u.Edges), "removed_edges": len(u.RemoveEdges), "superseded": len(u.Supersede)})
	}
	fmt.Fprintf(f.IO.Out, "recorded at seq %d: %d nodes, %d edges, %d edges removed, %d superseded\n", seq, len(u.Nodes), len(u.Edges), len(u.RemoveEdges), len(u.Supersede))
	return nil
}

// provenanceFlags binds --source, --ref and --trust.
func provenanceFlags(cmd *cobra.Command, p *schemas.Provenance) {
	cmd.Flags().StringVar(&p.Source, "source", "user", "provenance: code, user, history, academic or llm_inference")
	cmd.Flags().StringVar(&p.Ref, "ref", "", "provenance: the evidence (a path:line, a URL, an event id)")
	cmd.Flags().IntVar(&p.Trust, "trust", 0, "trust 1-100 (0: the source's default)")
}

func newNodeCmd(f *cmdutil.Factory) *cobra.Command {
	var n schemas.GraphNode
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "node ID --domain D --type T --name NAME",
		Short: "Add a node (or replace the node of that id)",
		Example: `  sylk graph node code:cfg.Load --domain code --type function --name Load --path cfg/load.go --line 12 --source code
  sylk graph node acad:yaml --domain academic --type documentation --name "YAML 1.2" --ref https://yaml.org/spec/1.2.2/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n.ID = args[0]
			return record(cmd.Context(), f, &schemas.GraphUpdate{Nodes: []schemas.GraphNode{n}}, asJSON)
		},
	}
	cmd.Flags().StringVar(&n.Domain, "domain", "", "code, history or academic")
	cmd.Flags().StringVar(&n.Type, "type", "", "the node's type in its domain (see 'sylk graph --help')")
	cmd.Flags().StringVar(&n.Name, "name", "", "the node's name")
	cmd.Flags().StringVar(&n.Path, "path", "", "a file the node is in")
	cmd.Flags().IntVar(&n.Line, "line", 0, "its line")
	cmd.Flags().StringVar(&n.Content, "content", "", "a text about it")
	provenanceFlags(cmd, &n.Provenance)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was recorded as JSON")
	return cmd
}

func newLinkCmd(f *cmdutil.Factory) *cobra.Command {
	var e schemas.GraphEdge
	var remove, asJSON bool
	cmd := &cobra.Command{
		Use:   "link FROM TYPE TO",
		Short: "Add a typed, weighted edge between two nodes (or remove it with --remove)",
		Example: `  sylk graph link code:cfg.Load calls code:cfg.parse --source code --ref cfg/load.go:20
  sylk graph link hist:strict based_on acad:yaml --weight 0.8 --source llm_inference
  sylk graph link hist:strict based_on acad:yaml --remove`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.GraphEdgeRef = schemas.GraphEdgeRef{From: args[0], Type: args[1], To: args[2]}
			u := &schemas.GraphUpdate{Edges: []schemas.GraphEdge{e}}
			if remove {
				u = &schemas.GraphUpdate{RemoveEdges: []schemas.GraphEdgeRef{e.GraphEdgeRef}}
			}
			return record(cmd.Context(), f, u, asJSON)
		},
	}
	cmd.Flags().Float64Var(&e.Weight, "weight", 1, "the edge's weight, in (0, 1]")
	provenanceFlags(cmd, &e.Provenance)
	cmd.Flags().BoolVar(&remove, "remove", false, "remove the edge instead")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was recorded as JSON")
	return cmd
}

func newSupersedeCmd(f *cmdutil.Factory) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "supersede OLD NEW",
		Short: "Mark node OLD superseded by node NEW",
		Long: `OLD stays readable ('sylk graph show OLD' says what superseded it and why),
NEW gets a supersedes edge to it, and traversals and listings leave OLD out
unless --superseded. A node is superseded once.`,
		Example: `  sylk graph supersede hist:strict hist:lenient --reason "old configs must load"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return record(cmd.Context(), f, &schemas.GraphUpdate{Supersede: []schemas.GraphSupersede{{Old: args[0], New: args[1], Reason: reason}}}, asJSON)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was recorded as JSON")
	return cmd
}

func newAddCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "add FILE|-",
		Short: "Record a whole graph_update (nodes, edges, removals, supersessions) from JSON",
		Long: `The file holds a graph_update payload ('sylk schema graph_update' prints its
JSON Schema): {"nodes": [...], "edges": [...], "remove_edges": [...],
"supersede": [...]}. Unknown fields are refused. It is applied whole or
refused whole: nodes first, so an edge may join nodes the same file adds.`,
		Example: `  sylk graph add update.json
  echo '{"nodes":[{"id":"p:x","domain":"academic","type":"paper","name":"X","source":"academic"}]}' | sylk graph add -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = f.IO.In
			if args[0] != "-" {
				fh, err := os.Open(args[0])
				if err != nil {
					return cmdutil.UsageError{Err: err}
				}
				defer fh.Close()
				in = fh
			}
			dec := json.NewDecoder(in)
			dec.DisallowUnknownFields()
			var u schemas.GraphUpdate
			if err := dec.Decode(&u); err != nil {
				return cmdutil.Usagef("%s: not a graph_update payload: %v", args[0], err)
			}
			return record(cmd.Context(), f, &u, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was recorded as JSON")
	return cmd
}

// query validates q (a usage error when it is wrong) and asks it.
func query(ctx context.Context, f *cmdutil.Factory, q projections.GraphQuery) (*projections.GraphResult, error) {
	if err := q.Validate(); err != nil {
		return nil, cmdutil.UsageError{Err: err}
	}
	r, err := f.State(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Graph(ctx, q)
}

// filterFlags binds the flags that filter edges and nodes.
func filterFlags(cmd *cobra.Command, q *projections.GraphQuery) {
	cmd.Flags().StringSliceVar(&q.EdgeTypes, "edge-type", nil, "follow only edges of these types")
	cmd.Flags().StringVar(&q.Direction, "direction", "", "out, in or both")
	cmd.Flags().Float64Var(&q.MinWeight, "min-weight", 0, "leave out edges lighter than this")
}

func nodeLine(n *projections.GraphNodeRec) string {
	s := fmt.Sprintf("%s\t%s/%s\t%s\ttrust %d (%s", n.ID, n.Domain, n.Type, n.Name, n.Trust, n.Source)
	if n.Ref != "" {
		s += " " + n.Ref
	}
	s += ")"
	if n.SupersededBy != "" {
		s += "\tsuperseded by " + n.SupersededBy
	}
	return s
}

func newShowCmd(f *cmdutil.Factory) *cobra.Command {
	q := projections.GraphQuery{Kind: projections.GraphNode}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "A node, its provenance, and its edges both ways",
		Example: `  sylk graph show code:cfg.Load
  sylk graph show code:cfg.Load --edge-type calls --direction in --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q.ID = args[0]
			res, err := query(cmd.Context(), f, q)
			if err != nil {
				return err
			}
			if res.Node == nil {
				return fmt.Errorf("node %q: %w ('sylk graph ls' lists the nodes)", q.ID, projections.ErrNotFound)
			}
			if asJSON {
				return f.IO.PrintJSON(res)
			}
			n := res.Node
			fmt.Fprintf(f.IO.Out, "%s  %s/%s  %s\n", n.ID, n.Domain, n.Type, n.Name)
			if n.Path != "" {
				fmt.Fprintf(f.IO.Out, "  at %s:%d\n", n.Path, n.Line)
			}
			fmt.Fprintf(f.IO.Out, "  provenance: %s, trust %d, recorded by %s at seq %d\n", strings.TrimSpace(n.Source+" "+n.Ref), n.Trust, n.Agent, n.Seq)
			if n.SupersededBy != "" {
				fmt.Fprintf(f.IO.Out, "  superseded by %s at seq %d: %s\n", n.SupersededBy, n.SupersededSeq, n.SupersedeReason)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			for _, e := range res.Edges {
				other, arrow := e.To, "->"
				if e.Direction == projections.GraphIn {
					other, arrow = e.From, "<-"
				}
				fmt.Fprintf(tw, "  %s %s\t%s\tweight %.2f\ttrust %d (%s)\n", arrow, e.Type, other, e.Weight, e.Trust, strings.TrimSpace(e.Source+" "+e.Ref))
			}
			return tw.Flush()
		},
	}
	filterFlags(cmd, &q)
	return withJSON(cmd, &asJSON)
}

func newListCmd(f *cmdutil.Factory) *cobra.Command {
	q := projections.GraphQuery{Kind: projections.GraphNodes}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "The nodes, of a domain and of types",
		Example: `  sylk graph ls --domain history
  sylk graph ls --type function,method --json | jq -r '.nodes[].node.id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := query(cmd.Context(), f, q)
			if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(res)
			}
			if len(res.Nodes) == 0 {
				fmt.Fprintln(f.IO.ErrOut, "no nodes: 'sylk graph node' adds one")
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			for _, h := range res.Nodes {
				fmt.Fprintln(tw, nodeLine(&h.Node))
			}
			return tw.Flush()
		},
	}
	nodeFilterFlags(cmd, &q)
	return withJSON(cmd, &asJSON)
}

// nodeFilterFlags binds the flags that keep nodes by domain, type and
// supersession, and --limit.
func nodeFilterFlags(cmd *cobra.Command, q *projections.GraphQuery) {
	cmd.Flags().StringVar(&q.Domain, "domain", "", "only nodes of this domain: code, history, academic")
	cmd.Flags().StringSliceVar(&q.NodeTypes, "type", nil, "only nodes of these types")
	cmd.Flags().BoolVar(&q.Superseded, "superseded", false, "superseded nodes too")
	cmd.Flags().IntVar(&q.Limit, "limit", 0, fmt.Sprintf("at most this many nodes (0: %d)", projections.DefaultGraphLimit))
}

func withJSON(cmd *cobra.Command, asJSON *bool) *cobra.Command {
	cmd.Flags().BoolVar(asJSON, "json", false, "print JSON")
	return cmd
}

func newTraverseCmd(f *cmdutil.Factory) *cobra.Command {
	q := projections.GraphQuery{Kind: projections.GraphTraverse}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "traverse ID",
		Short: "The nodes reachable from a node, best path first",
		Long: `Walks the graph breadth first from ID, up to --depth hops, along the edges of
--edge-type (all by default) in --direction (out by default). Each node is
reported once, at its fewest hops, with the best path there; its score is
the product of the path's edge weights times the node's trust over 100.
--type and --domain keep the nodes reported; the walk goes through any.
Superseded nodes are neither walked through nor reported unless --superseded.`,
		Example: `  sylk graph traverse hist:lenient --depth 3 --type function,method
  sylk graph traverse code:cfg.parse --direction in --edge-type calls,modified --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q.ID = args[0]
			res, err := query(cmd.Context(), f, q)
			if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(res)
			}
			if len(res.Nodes) == 0 {
				fmt.Fprintf(f.IO.ErrOut, "nothing reachable from %q as asked\n", q.ID)
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCORE\tHOPS\tNODE\tKIND\tNAME\tPATH")
			for _, h := range res.Nodes {
				path := h.Path[0]
				for i, v := range h.Via {
					path += " -" + v + "- " + h.Path[i+1]
				}
				fmt.Fprintf(tw, "%.3f\t%d\t%s\t%s/%s\t%s\t%s\n", h.Score, h.Depth, h.Node.ID, h.Node.Domain, h.Node.Type, h.Node.Name, path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&q.Depth, "depth", 0, fmt.Sprintf("hops, 1-%d (0: %d)", projections.MaxGraphDepth, projections.DefaultGraphDepth))
	filterFlags(cmd, &q)
	nodeFilterFlags(cmd, &q)
	return withJSON(cmd, &asJSON)
}
