// Package search is `sylk search`: ranked full-text search, symbol lookup,
// callers, callees, dependencies and health from the Librarian's code index.
package search

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/cmd/sylk/index"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// SearchOptions are the flags of `sylk search`.
type SearchOptions struct {
	Dir      string
	Session  string
	Limit    int
	JSON     bool
	NoUpdate bool
	// Types and Langs filter the answer (CodeQuery.Types, .Langs).
	Types, Langs []string
	// One query kind at most.
	Symbol, Callers, Callees, Deps, Dependents, Health bool
	// Graph searches the knowledge graph's nodes instead, of Domain (and
	// of the node types in Types), superseded ones too with Superseded.
	Graph      bool
	Domain     string
	Superseded bool
}

// kind is the query kind the flags ask for.
func (o *SearchOptions) kind() (string, error) {
	kinds := map[string]bool{
		projections.CodeSymbol: o.Symbol, projections.CodeCallers: o.Callers, projections.CodeCallees: o.Callees,
		projections.CodeDeps: o.Deps, projections.CodeDependents: o.Dependents, projections.CodeHealth: o.Health,
	}
	kind := projections.CodeSearch
	for k, on := range kinds {
		if on {
			if kind != projections.CodeSearch {
				return "", cmdutil.Usagef("--%s and --%s: ask one thing at a time", kind, k)
			}
			kind = k
		}
	}
	return kind, nil
}

func NewCmdSearch(f *cmdutil.Factory) *cobra.Command {
	opts := &SearchOptions{}
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search the code of a work directory (ranked text, symbols, callers, dependencies) or the knowledge graph",
		Long: `Searches the Librarian's code index of the work directory (--dir, default the
current one), bringing it up to date first (only changed files are read
again; --no-update skips that).

Without a flag, QUERY is ranked full-text search (BM25) over every file's
words: identifiers count as their parts too, so "config loader" finds
parseConfigFile and internal/config/loader.go. With an embedding model
configured (llm.embedding_model, SYLK_LLM_EMBEDDING_MODEL; the endpoint is
--llm-base-url's /embeddings) the search is hybrid: each file's vector and
the query's are recorded once as embedding events, and the BM25 ranking, the
vector ranking and the call-graph ranking (the files calling, or called by,
the best ten of the other two) are fused by reciprocal rank. Without one, or
when the endpoint fails, the ranking is BM25 only and stderr says so.

With a flag, QUERY is a name:

  --symbol      declarations named QUERY: Name, Recv.Method or pkg.Name
  --callers     the calls to QUERY (Go)
  --callees     the calls made by the function or method QUERY (Go)
  --deps        the packages the Go package QUERY imports
  --dependents  the packages importing QUERY
  --health      the health of the files under the path QUERY (maturity, tests,
                debt markers, documented declarations); QUERY may be "."

Filters (comma-separated or repeated):

  --lang        only files of these languages (go, python, markdown, text, ...):
                a search, --symbol, --callers, --callees
  --type        only declarations of these kinds (func, method, struct,
                interface, type, var, const): --symbol, and a search, which
                then finds the files declaring one whose name holds a word
                of QUERY

With --graph, QUERY searches the knowledge graph's nodes ('sylk graph'): the
code, history and academic knowledge recorded as graph_update events. Three
rankings are fused by reciprocal rank, and --json shows each hit's three
scores:

  lexical      BM25 over each node's name, path and content
  similarity   the cosine similarity of each node's vector (its name and
               content, embedded once and recorded) to QUERY's, with an
               embedding model configured
  graph        the weighted neighbourhood of the best ten hits of the other
               two: each node reached within two hops scores the path's
               weight (the product of its edges' weights) times its trust
               over 100, divided by 1 + the hit's rank; paths never pass
               through a superseded node

  --domain      only nodes of this domain: code, history or academic
  --type        only nodes of these types (function, decision, paper, ...;
                the list is in 'sylk graph --help')
  --superseded  superseded nodes too

The filters are applied inside the lexical and vector searches, so a filter
that keeps few nodes still gets --limit of them; the graph ranking starts
from the best hits of every domain, so a decision is found through the code
it modified.`,
		Example: `  sylk search "retry backoff"
  sylk search --symbol Store.History
  sylk search --callers projections.RootID --json | jq -r '.calls[].path'
  sylk search --dependents github.com/sylk/sylk/tools
  sylk search --health internal/auth
  sylk search --type func,method "retry"
  sylk search --lang python --json "parse config"
  sylk search --graph --type decision "config loading"
  sylk search --graph --domain academic --json "yaml keys" | jq '.hits[] | {id: .node.id, lexical, similarity, graph}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return searchRun(cmd.Context(), f, opts, args[0])
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", ".", "the work directory")
	cmd.Flags().StringVar(&opts.Session, "session", "_", "the session an index update is recorded in")
	cmd.Flags().IntVar(&opts.Limit, "limit", 10, "at most N results")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the answer as one JSON object")
	cmd.Flags().BoolVar(&opts.NoUpdate, "no-update", false, "search the index as it is, without reading changed files")
	cmd.Flags().BoolVar(&opts.Symbol, "symbol", false, "find declarations named QUERY")
	cmd.Flags().BoolVar(&opts.Callers, "callers", false, "find the calls to QUERY")
	cmd.Flags().BoolVar(&opts.Callees, "callees", false, "find the calls made by QUERY")
	cmd.Flags().BoolVar(&opts.Deps, "deps", false, "the packages QUERY imports")
	cmd.Flags().BoolVar(&opts.Dependents, "dependents", false, "the packages that import QUERY")
	cmd.Flags().BoolVar(&opts.Health, "health", false, "the health of the files under the path QUERY")
	cmd.Flags().StringSliceVar(&opts.Types, "type", nil, "only declarations of these kinds: "+strings.Join(schemas.SymbolKinds, ", ")+" (with --graph: node types)")
	cmd.Flags().BoolVar(&opts.Graph, "graph", false, "search the knowledge graph's nodes (lexical, vector and graph scores fused)")
	cmd.Flags().StringVar(&opts.Domain, "domain", "", "with --graph: only nodes of this domain (code, history, academic)")
	cmd.Flags().BoolVar(&opts.Superseded, "superseded", false, "with --graph: superseded nodes too")
	cmd.Flags().StringSliceVar(&opts.Langs, "lang", nil, "only files of these languages (go, python, markdown, ...)")
	return cmd
}

func searchRun(ctx context.Context, f *cmdutil.Factory, opts *SearchOptions, query string) error {
	if opts.Limit < 1 {
		return cmdutil.Usagef("--limit %d: at least 1", opts.Limit)
	}
	if opts.Graph {
		return graphRun(ctx, f, opts, query)
	}
	if opts.Domain != "" || opts.Superseded {
		return cmdutil.Usagef("--domain and --superseded filter the knowledge graph's nodes: add --graph")
	}
	kind, err := opts.kind()
	if err != nil {
		return err
	}
	ix, err := librarian.NewIndexer(opts.Dir)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	q := projections.CodeQuery{Root: ix.Root, Kind: kind, Text: query, Limit: opts.Limit, Types: opts.Types, Langs: opts.Langs}
	if err := q.Validate(); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if !opts.NoUpdate {
		if _, _, err := index.Refresh(ctx, f, r, ix, opts.Session, nil); err != nil {
			return err
		}
	}
	note := ""
	if kind == projections.CodeSearch {
		if q.Embedding, note, err = embedding(ctx, f, r, ix, opts.Session, query, !opts.NoUpdate); err != nil {
			return err
		}
	}
	res, err := r.Code(ctx, q)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(struct {
			*projections.CodeResult
			Note string `json:"note,omitempty"`
		}{res, note})
	}
	if note != "" {
		fmt.Fprintln(f.IO.ErrOut, note)
	}
	if !res.Indexed {
		fmt.Fprintf(f.IO.ErrOut, "%s has no index: 'sylk index update --dir %s' makes one\n", ix.Root, opts.Dir)
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	n := printResult(tw, res)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Unknown) > 0 {
		fmt.Fprintf(f.IO.ErrOut, "no file contains: %s\n", strings.Join(res.Unknown, ", "))
	}
	if n == 0 {
		fmt.Fprintf(f.IO.ErrOut, "nothing matches %q\n", query)
	}
	return nil
}

// printResult prints what res holds, one line an item, and returns how many.
func printResult(tw *tabwriter.Writer, res *projections.CodeResult) int {
	n := 0
	for _, h := range res.Hits {
		n++
		fmt.Fprintf(tw, "%s\t%.3f\t%s\n", h.Path, h.Score, h.Lang)
		for _, s := range h.Symbols {
			fmt.Fprintf(tw, "  %s:%d\t\t%s %s\n", h.Path, s.Line, s.Kind, name(s))
		}
	}
	for _, s := range res.Symbols {
		n++
		fmt.Fprintf(tw, "%s:%d\t%s %s\t%s\n", s.Path, s.Line, s.Kind, name(s), s.Signature)
	}
	for _, c := range res.Calls {
		n++
		fmt.Fprintf(tw, "%s:%d\t%s\t-> %s\n", c.Path, c.Line, c.From, c.To)
	}
	for _, p := range res.Packages {
		n++
		fmt.Fprintln(tw, p)
	}
	if h := res.Health; h != nil && h.Files > 0 {
		n++
		fmt.Fprintf(tw, "%s: %s\n", h.Area, h.Maturity)
		fmt.Fprintf(tw, "  files\t%d (%d source, %d test, %d lines)\n", h.Files, h.SourceFiles, h.TestFiles, h.Lines)
		fmt.Fprintf(tw, "  tests\t%.2f test files per source file\n", h.TestRatio)
		fmt.Fprintf(tw, "  debt\t%d markers (TODO, FIXME, HACK, XXX), %.1f per 1000 lines\n", h.DebtMarkers, h.DebtPer1K)
		fmt.Fprintf(tw, "  documented\t%.0f%% of declarations\n", h.Documented*100)
		fmt.Fprintf(tw, "  recommendation\t%s\n", h.Recommendation)
	}
	return n
}

func name(s projections.CodeSymbolHit) string {
	if s.Recv != "" {
		return s.Recv + "." + s.Name
	}
	return s.Name
}
