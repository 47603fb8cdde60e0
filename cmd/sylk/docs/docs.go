// Package docs is `sylk docs`: local documents ingested for the Academic,
// listed, and researched.
package docs

import (
	"context"
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/academic"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/search"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// NewCmdDocs is `sylk docs`.
func NewCmdDocs(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "docs",
		Short: "Local documents for the Academic: add, list, research",
		Long: `The Academic answers research requests from documents you ingest: Markdown,
HTML, plain text and the text of PDF files, read locally (no network). Each
document is cut into chunks by section (a heading and its text, a PDF page),
secrets are redacted, and the chunks are recorded as a doc_update event; the
documents projection is folded from those events, so 'sylk projections
rebuild' reads no file again. Adding a document again records it only if its
bytes changed, and with an embedding model configured only the chunks whose
text changed are embedded again (each vector is recorded once as an
embedding event).

Files that cannot be ingested (a PDF that does not parse, binary or huge
files, unknown formats, files that vanished) are skipped and the reason is
recorded: 'sylk docs ls' shows it.`,
		Example: `  sylk docs add design.md papers/
  sylk docs ls
  sylk docs research "retry with backoff" --dir .`,
	}
	cmd.AddCommand(newAddCmd(f), newListCmd(f), newResearchCmd(f))
	return cmd
}

// addReport is what `docs add --json` prints.
type addReport struct {
	Docs    int    `json:"docs"`
	Chunks  int    `json:"chunks"`
	Skipped int    `json:"skipped"`
	Events  int    `json:"events"`
	Seq     uint64 `json:"seq,omitempty"`
	// Embedded chunks have a vector; Sent of them went to the endpoint.
	Embedded int               `json:"embedded"`
	Sent     int               `json:"sent"`
	Ranking  string            `json:"ranking,omitempty"`
	Reasons  []schemas.DocSkip `json:"skipped_files,omitempty"`
}

func newAddCmd(f *cmdutil.Factory) *cobra.Command {
	var session string
	var asJSON, reingest bool
	cmd := &cobra.Command{
		Use:   "add PATH...",
		Short: "Ingest documents (files, or directories of .md, .html, .txt and .pdf files)",
		Example: `  sylk docs add design.md papers/
  sylk docs add spec.pdf --json | jq .sent    # chunks sent to the embedding endpoint
  sylk docs add notes/ --reingest             # record every document again`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !schemas.ValidName(session) {
				return cmdutil.Usagef("--session %q is not a session id", session)
			}
			return addRun(cmd.Context(), f, args, session, asJSON, reingest)
		},
	}
	cmd.Flags().StringVar(&session, "session", "_", "the session the events are recorded in")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was done as JSON")
	cmd.Flags().BoolVar(&reingest, "reingest", false, "read and record every document again, changed or not")
	return cmd
}

func addRun(ctx context.Context, f *cmdutil.Factory, paths []string, session string, asJSON, reingest bool) error {
	in, err := academic.NewIngester()
	if err != nil {
		return err
	}
	in.Reingest = reingest
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	known, err := academic.Known(ctx, r)
	if err != nil {
		return err
	}
	ups, err := in.Ingest(ctx, known, paths)
	if err != nil {
		return err
	}
	rep := addReport{Events: len(ups)}
	rep.Docs, rep.Chunks, rep.Skipped = academic.Counts(ups)
	for _, u := range ups {
		rep.Reasons = append(rep.Reasons, u.Skipped...)
	}
	if len(ups) > 0 {
		if rep.Seq, err = academic.Record(ctx, r.Log, session, "user", f.Now(), ups); err != nil {
			return err
		}
		if err := r.Sync(ctx, rep.Seq); err != nil {
			return err
		}
		if rej, err := r.Rejected(ctx, rep.Seq); err == nil && rej != nil {
			return fmt.Errorf("the documents projection refused the update at seq %d: %s", rep.Seq, rej.Reason)
		}
	}
	e, rec, note, err := search.Embedder(f, r, session)
	if err != nil {
		return err
	}
	rep.Ranking = projections.RankLexical
	if e != nil {
		er, err := academic.Embed(ctx, r, e, rec)
		rep.Embedded, rep.Sent = er.Chunks, er.Sent
		if err != nil {
			note = "searches rank by BM25 only until embedding works: " + err.Error()
		} else {
			rep.Ranking = projections.RankHybrid
		}
	}
	if asJSON {
		return f.IO.PrintJSON(rep)
	}
	if rep.Docs == 0 && rep.Skipped == 0 {
		fmt.Fprintln(f.IO.Out, "the documents are up to date")
	} else {
		fmt.Fprintf(f.IO.Out, "%d documents ingested (%d chunks), %d files skipped\n", rep.Docs, rep.Chunks, rep.Skipped)
	}
	for _, s := range rep.Reasons {
		fmt.Fprintf(f.IO.ErrOut, "skipped %s: %s\n", s.Path, s.Reason)
	}
	if e != nil {
		fmt.Fprintf(f.IO.Out, "%d chunks have vectors; %d sent to the embedding endpoint\n", rep.Embedded, rep.Sent)
	}
	if note != "" {
		fmt.Fprintln(f.IO.ErrOut, note)
	}
	return nil
}

func newListCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Short:   "The documents ingested, and the files skipped with the reason",
		Example: "  sylk docs ls\n  sylk docs ls --json | jq -r '.skipped[] | .path + \": \" + .reason'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.Docs(cmd.Context(), projections.DocsQuery{Kind: projections.DocsList})
			if err != nil {
				return err
			}
			if asJSON {
				return f.IO.PrintJSON(res)
			}
			if len(res.Docs) == 0 && len(res.Skipped) == 0 {
				fmt.Fprintln(f.IO.ErrOut, "no documents: 'sylk docs add PATH...' ingests some")
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PATH\tFORMAT\tCHUNKS\tTITLE")
			for _, d := range res.Docs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", d.Path, d.Format, d.Chunks, d.Title)
			}
			for _, s := range res.Skipped {
				fmt.Fprintf(tw, "%s\tskipped\t-\t%s\n", s.Path, s.Reason)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newResearchCmd(f *cmdutil.Factory) *cobra.Command {
	var dir, session string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "research QUESTION",
		Short: "Answer a question from the documents, as the Academic does, with citations and applicability",
		Long: `Searches the ingested documents (hybrid with an embedding model, else BM25)
and judges each chunk found against the code index of --dir (see 'sylk
index'): DIRECT when it names a declaration of the code or its examples are
in a language of it, INCOMPATIBLE when its examples are all in languages the
code does not use (with the adaptation needed), ADAPTABLE otherwise. Each
finding cites its document and section (path#section). The Academic answers
a research_request the same way.`,
		Example: `  sylk docs research "retry with backoff"
  sylk docs research "connection pooling" --dir ~/src/app --json | jq '.findings[] | {source, applicability}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			root, err := filepath.Abs(dir)
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			r, err := f.State(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			e, rec, note, err := search.Embedder(f, r, session)
			if err != nil {
				return err
			}
			var emb *projections.CodeEmbedding
			if e != nil {
				if emb, note, err = search.QueryVector(ctx, r, e, rec, args[0]); err != nil {
					return err
				}
			}
			ans, err := academic.Answer(ctx, r, filepath.ToSlash(root), args[0], emb)
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			if note != "" {
				fmt.Fprintln(f.IO.ErrOut, note)
			}
			if asJSON {
				return f.IO.PrintJSON(ans)
			}
			fmt.Fprintln(f.IO.Out, ans.Answer)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "the work directory findings are judged against")
	cmd.Flags().StringVar(&session, "session", "_", "the session the question's embedding is recorded in")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}
