// Package dlq is `sylk dlq`: the dead letters, shown and resent.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
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

// deadLetter is one DLQ message as the CLI shows it.
type deadLetter struct {
	ID         uint64              `json:"id"`
	Time       time.Time           `json:"time"`
	Consumer   string              `json:"consumer"`
	Reason     string              `json:"reason"`
	Deliveries string              `json:"deliveries"`
	StreamSeq  string              `json:"stream_seq"`
	Subject    string              `json:"subject"`
	Type       string              `json:"type,omitempty"`
	Session    string              `json:"session,omitempty"`
	Envelope   *schemas.Envelope   `json:"envelope,omitempty"`
	Invalid    string              `json:"invalid,omitempty"`
	Headers    map[string][]string `json:"headers,omitempty"`
}

func deadLetterOf(m *jetstream.RawStreamMsg) deadLetter {
	h := m.Header
	dl := deadLetter{
		ID: m.Sequence, Time: m.Time, Consumer: h.Get(agents.HeaderDLQConsumer), Reason: h.Get(agents.HeaderDLQReason),
		Deliveries: h.Get(agents.HeaderDLQDeliveries), StreamSeq: h.Get(agents.HeaderDLQStreamSeq),
		Subject: h.Get(agents.HeaderDLQSubject), Type: h.Get(events.HeaderType), Session: h.Get(events.HeaderSession),
	}
	if toks := strings.Split(dl.Subject, "."); len(toks) == 6 {
		// Bytes from an outside client carry no Sylk headers: the subject
		// still says where they were going.
		if dl.Session == "" {
			dl.Session = toks[2]
		}
		if dl.Type == "" {
			dl.Type = toks[5]
		}
	}
	env, err := schemas.Unmarshal(m.Data)
	if err != nil {
		dl.Invalid = err.Error()
	} else {
		dl.Envelope = env
	}
	return dl
}

func dlqStream(ctx context.Context, f *cmdutil.Factory) (jetstream.Stream, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	return b.JetStream().Stream(ctx, broker.DLQStream)
}

func newDLQLsCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List dead letters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := dlqStream(ctx, f)
			if err != nil {
				return err
			}
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			var rows []deadLetter
			for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
				m, err := s.GetMsg(ctx, seq)
				if errors.Is(err, jetstream.ErrMsgNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				rows = append(rows, deadLetterOf(m))
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

func dlqGet(ctx context.Context, f *cmdutil.Factory, arg string) (*jetstream.RawStreamMsg, error) {
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil {
		return nil, cmdutil.Usagef("dead letter id %q: want the number 'sylk dlq ls' shows", arg)
	}
	s, err := dlqStream(ctx, f)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMsg(ctx, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("no dead letter %d; 'sylk dlq ls' lists them", id)
	}
	return m, err
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
			dl := deadLetterOf(m)
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
			m, err := dlqGet(ctx, f, args[0])
			if err != nil {
				return err
			}
			b, err := f.Broker(ctx)
			if err != nil {
				return err
			}
			subject := m.Header.Get(agents.HeaderDLQSubject)
			env, derr := schemas.Unmarshal(m.Data)
			var seq uint64
			if derr != nil {
				ack, err := b.JetStream().PublishMsg(ctx, &nats.Msg{Subject: subject, Data: m.Data})
				if err != nil {
					return err
				}
				seq = ack.Sequence
			} else {
				again := *env
				again.ID, again.ParentID, again.Attempt = schemas.NewID(), env.ID, env.Attempt+1
				again.Timestamp = f.Now().UTC()
				if seq, err = events.New(b.JetStream()).Append(ctx, &again); err != nil {
					return err
				}
				env = &again
			}
			if asJSON {
				out := map[string]any{"seq": seq, "subject": subject}
				if derr == nil {
					out["id"] = env.ID
				}
				return f.IO.PrintJSON(out)
			}
			fmt.Fprintf(f.IO.Out, "resent dead letter %s as seq %d on %s\n", args[0], seq, subject)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}
