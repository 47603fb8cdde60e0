// Package dlq is `sylk dlq`: the dead letters, shown and resent.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func NewCmdDLQ(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and resend dead letters",
		Long: `Messages an agent gave up on (invalid bytes, a permanent error, too many
failed deliveries) are kept in the SYLK_DLQ stream with their original bytes and
headers, the reason, the consumer and the delivery count. Nothing is dropped
silently: every one is also a dead_letter event in its session.`,
	}
	cmd.AddCommand(newDLQLsCmd(f), newDLQShowCmd(f), newDLQResendCmd(f))
	return cmd
}

func jetStream(ctx context.Context, f *cmdutil.Factory) (jetstream.JetStream, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	return b.JetStream(), nil
}

func newDLQLsCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List dead letters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			js, err := jetStream(ctx, f)
			if err != nil {
				return err
			}
			rows, err := agents.DeadLetters(ctx, js)
			if err != nil {
				return err
			}
			if asJSON {
				for _, r := range rows {
					r.Envelope, r.Headers = nil, nil
					if err := f.IO.PrintJSON(r); err != nil {
						return err
					}
				}
				return nil
			}
			if len(rows) == 0 {
				fmt.Fprintln(f.IO.Out, "no dead letters")
				return nil
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTIME\tCONSUMER\tSESSION\tTYPE\tDELIVERIES\tREASON")
			for _, r := range rows {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Time.Local().Format(time.DateTime), r.Consumer, r.Session, r.Type, r.Deliveries, cmdutil.TruncateRunes(r.Reason, 80))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON lines")
	return cmd
}

func dlqID(arg string) (uint64, error) {
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return 0, cmdutil.Usagef("dead letter id %q: want the number 'sylk dlq ls' shows", arg)
	}
	return id, nil
}

func dlqGet(ctx context.Context, f *cmdutil.Factory, arg string) (*jetstream.RawStreamMsg, error) {
	id, err := dlqID(arg)
	if err != nil {
		return nil, err
	}
	js, err := jetStream(ctx, f)
	if err != nil {
		return nil, err
	}
	m, err := agents.GetDeadLetter(ctx, js, id)
	return m, withHint(err)
}

// withHint says where the ids are when one is unknown.
func withHint(err error) error {
	if errors.Is(err, agents.ErrNoDeadLetter) {
		return fmt.Errorf("%w; 'sylk dlq ls' lists them", err)
	}
	return err
}

func newDLQShowCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a dead letter: reason, headers and the original envelope",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := dlqGet(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			dl := agents.DeadLetterOf(m)
			dl.Headers = m.Header
			if asJSON {
				return f.IO.PrintJSON(dl)
			}
			out := f.IO.Out
			fmt.Fprintf(out, "dead letter %d at %s\n  consumer:   %s\n  reason:     %s\n  deliveries: %s\n  original:   stream seq %s, subject %s\n",
				dl.ID, dl.Time.Local().Format(time.DateTime), dl.Consumer, dl.Reason, dl.Deliveries, dl.StreamSeq, dl.Subject)
			if dl.Invalid != "" {
				fmt.Fprintf(out, "  bytes are not an envelope: %s\n  %q\n", dl.Invalid, cmdutil.TruncateRunes(string(m.Data), 200))
				return nil
			}
			fmt.Fprintln(out, "  envelope:")
			return cmdutil.PrintIndentedJSON(out, dl.Envelope)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func newDLQResendCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "resend ID",
		Short: "Put a dead letter back on the event log for its agent",
		Long: `Appends the dead letter again as a new event: a copy of the envelope with a new
id, parent_id = the original and one more attempt, on the original subject, so
the agent gets it again. Bytes that were never an envelope are republished as
they are.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := dlqID(args[0])
			if err != nil {
				return err
			}
			js, err := jetStream(ctx, f)
			if err != nil {
				return err
			}
			r, err := agents.ResendDeadLetter(ctx, js, id, f.Now())
			if err != nil {
				return withHint(err)
			}
			if asJSON {
				return f.IO.PrintJSON(r)
			}
			fmt.Fprintf(f.IO.Out, "resent dead letter %s as seq %d on %s\n", args[0], r.Seq, r.Subject)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
