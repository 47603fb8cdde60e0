package history

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func newPromoteCmd(f *cmdutil.Factory) *cobra.Command {
	var reason string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "promote ID",
		Short: "Promote a session's history entry to project scope: every session sees it",
		Long: `Promotes the history entry with event id ID (the "id" of 'sylk history --json')
to project scope (seed L33442): from then on every session's history shows
it beside its own entries. The promotion is a history_promote event.`,
		Example: `  sylk history --json | jq -r 'select(.category=="decision") | .id'
  sylk history promote 0193a7c2-6f1e-7c3a-9d4b-2f0e8a1b3c4d --reason "applies to every service"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !schemas.ValidName(args[0]) {
				return cmdutil.Usagef("%q is not an event id", args[0])
			}
			r, err := f.State(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			hs, err := r.History(ctx, projections.HistoryQuery{ID: args[0]})
			if err != nil {
				return err
			}
			if len(hs) == 0 {
				return fmt.Errorf("history entry %q: %w ('sylk history --all-sessions --json' lists the ids)", args[0], projections.ErrNotFound)
			}
			h := hs[0]
			env, err := schemas.New(schemas.TypeHistoryPromote, h.Session, "user", "user", f.Now(), schemas.HistoryPromote{EntryID: h.ID, Seq: h.Seq, Reason: reason})
			if err != nil {
				return err
			}
			seq, err := r.Log.Append(ctx, env)
			if err != nil {
				return err
			}
			if err := r.Sync(ctx, seq); err != nil {
				return err
			}
			if rej, err := r.Rejected(ctx, seq); err != nil || rej != nil {
				if rej != nil {
					return fmt.Errorf("the promotion was refused: %s", rej.Reason)
				}
				return err
			}
			if asJSON {
				h.Promoted = true
				return f.IO.PrintJSON(h)
			}
			fmt.Fprintf(f.IO.Out, "promoted %q (session %s): every session's history shows it\n", h.Summary, sessionLabel(h.Session))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why it matters beyond its session")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the promoted entry as JSON")
	return cmd
}

func newFailuresCmd(f *cmdutil.Factory) *cobra.Command {
	q := projections.FailureQuery{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "failures",
		Short: "The failure memory: approaches that failed the same way, counted across sessions",
		Long: fmt.Sprintf(`Each failed node's approach (its agent and tool, or its prompt) and its error,
normalised (numbers, paths, quoted values and ids replaced), name a failure
memory that counts every such failure in every session. From %d the
Archivalist warns the user; from %d it says to try another approach. The
most frequent first.`, projections.WarnFailures, projections.ChangeApproachFailures),
		Example: `  sylk history failures
  sylk history failures --min 2 --search timeout --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			ms, err := r.Failures(cmd.Context(), q)
			if err != nil {
				return err
			}
			if asJSON {
				for _, m := range ms {
					if err := f.IO.PrintJSON(m); err != nil {
						return err
					}
				}
				return nil
			}
			if len(ms) == 0 {
				fmt.Fprintln(f.IO.ErrOut, "no failures remembered")
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COUNT\tLEVEL\tLAST\tSESSIONS\tAPPROACH\tERROR")
			for _, m := range ms {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", m.Count, levelLabel(m.Level), m.Last.Local().Format(time.DateTime), len(m.Sessions), m.Approach, m.ErrorPattern)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&q.Search, "search", "", "only failures whose approach or error holds every word")
	cmd.Flags().IntVar(&q.MinCount, "min", 0, "only failures seen at least N times")
	cmd.Flags().IntVar(&q.Limit, "limit", 50, "at most N failures")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per failure memory")
	return cmd
}

func levelLabel(l string) string {
	switch l {
	case "":
		return "-"
	case "change_approach":
		return "try another approach"
	}
	return l
}
