package search

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
)

// graphRun is `sylk search --graph`: a search of the knowledge graph's
// nodes, lexical, vector and graph rankings fused.
func graphRun(ctx context.Context, f *cmdutil.Factory, opts *SearchOptions, query string) error {
	switch {
	case len(opts.Langs) > 0:
		return cmdutil.Usagef("--lang filters code files; the graph's nodes are filtered by --domain and --type (node types: see 'sylk graph --help')")
	case opts.Symbol || opts.Callers || opts.Callees || opts.Deps || opts.Dependents || opts.Health:
		return cmdutil.Usagef("--graph searches the knowledge graph by text; --symbol, --callers, --callees, --deps, --dependents and --health ask the code index")
	}
	q := projections.GraphQuery{Kind: projections.GraphSearch, Text: query, Limit: opts.Limit, Domain: opts.Domain, NodeTypes: opts.Types, Superseded: opts.Superseded}
	if err := q.Validate(); err != nil {
		return cmdutil.UsageError{Err: err}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	e, rec, note, err := Embedder(f, r, opts.Session)
	switch {
	case err != nil:
		return err
	case e == nil:
		note = "ranked by BM25 and the graph only: no embedding model (" + llm.EmbedHint + ")"
	default:
		if err := embedNodes(ctx, r, e, rec); err != nil {
			note = "ranked by BM25 and the graph only: embedding the graph's nodes failed: " + err.Error()
		} else if q.Embedding, note, err = QueryVector(ctx, r, e, rec, query); err != nil {
			return err
		}
	}
	res, err := r.Graph(ctx, q)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(struct {
			*projections.GraphResult
			Note string `json:"note,omitempty"`
		}{res, note})
	}
	if note != "" {
		fmt.Fprintln(f.IO.ErrOut, note)
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCORE\tNODE\tDOMAIN/TYPE\tTRUST\tLEXICAL\tSIMILARITY\tGRAPH\tNAME\tGRAPH PATH")
	for _, h := range res.Hits {
		n := &h.Node
		via := ""
		if len(h.Path) > 1 {
			via = strings.Join(h.Path, " > ") + " (" + strings.Join(h.Via, ", ") + ")"
		}
		fmt.Fprintf(tw, "%.4f\t%s\t%s/%s\t%d\t%.3f\t%.3f\t%.3f\t%s\t%s\n", h.Score, n.ID, n.Domain, n.Type, n.Trust, h.Lexical, h.Similarity, h.Graph, n.Name, via)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(res.Unknown) > 0 {
		fmt.Fprintf(f.IO.ErrOut, "no node holds: %s\n", strings.Join(res.Unknown, ", "))
	}
	if len(res.Hits) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "nothing in the knowledge graph matches %q\n", query)
	}
	return nil
}

// embedNodes records the vectors of the graph's nodes that have none under
// e's model (their name and content); the recorded ones are not asked for
// again.
func embedNodes(ctx context.Context, r *cmdutil.StateReader, e *llm.Embedder, rec llm.RecordEmbeddings) error {
	all, err := r.Graph(ctx, projections.GraphQuery{Kind: projections.GraphEmbeds})
	if err != nil {
		return err
	}
	missing, err := librarian.MissingVectors(ctx, r, e, all.Embeds)
	for lo := 0; err == nil && lo < len(missing); lo += projections.MaxEmbeddingKeys {
		ids := missing[lo:min(lo+projections.MaxEmbeddingKeys, len(missing))]
		var res *projections.GraphResult
		if res, err = r.Graph(ctx, projections.GraphQuery{Kind: projections.GraphEmbeds, IDs: ids}); err != nil {
			break
		}
		texts := make([]string, 0, len(ids))
		for _, id := range ids {
			if t, ok := res.Texts[id]; ok {
				texts = append(texts, t)
			}
		}
		_, _, err = e.Embed(ctx, r, rec, texts)
	}
	return err
}
