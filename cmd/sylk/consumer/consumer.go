// Package consumer is `sylk consumer`: the durable consumers of the
// stream, for NATS clients outside Sylk.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func NewCmdConsumer(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consumer",
		Short: "Manage durable consumers for outside clients",
		Long: `Durable consumers let any NATS client read the event log at its own pace and
resume where it stopped. Sylk's own agents are consumers too (agent-<name>).`,
	}
	cmd.AddCommand(newConsumerAddCmd(f), newConsumerLsCmd(f), newConsumerRmCmd(f))
	return cmd
}

// ConsumerAddOptions are the flags of `sylk consumer add`.
type ConsumerAddOptions struct {
	Name    string
	Filter  string
	Deliver string
	AckWait time.Duration
	Creds   bool
	JSON    bool
}

func newConsumerAddCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ConsumerAddOptions{}
	cmd := &cobra.Command{
		Use:   "add NAME --filter SUBJECT [--deliver all|new|SEQ]",
		Short: "Create a durable pull consumer on the event log",
		Example: `  sylk consumer add audit --filter 'sylk.v1.>'
  sylk consumer add s1-plans --filter 'S1.*.user.plan_response' --deliver new
  sylk consumer add export --issue-creds   # and a .creds file that may read this consumer only`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := schemas.CheckName("consumer name", opts.Name); err != nil {
				return cmdutil.UsageError{Err: err}
			}
			return consumerAddRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Filter, "filter", "sylk.v1.>", "subject filter (sylk.v1. may be left out)")
	cmd.Flags().StringVar(&opts.Deliver, "deliver", "all", "where it starts: all, new, or a stream sequence")
	cmd.Flags().DurationVar(&opts.AckWait, "ack-wait", 30*time.Second, "redeliver a message not acked within this time")
	cmd.Flags().BoolVar(&opts.Creds, "issue-creds", false, "also issue a read-only credential for this consumer (user NAME, role consumer:NAME)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the consumer and connection details as JSON")
	return cmd
}

func consumerAddRun(ctx context.Context, f *cmdutil.Factory, opts *ConsumerAddOptions) error {
	filter, err := events.ParseSubject(opts.Filter)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	cfg := jetstream.ConsumerConfig{
		Durable: opts.Name, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy, AckWait: opts.AckWait,
		Description: "created by sylk consumer add",
	}
	switch opts.Deliver {
	case "all":
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case "new":
		cfg.DeliverPolicy = jetstream.DeliverNewPolicy
	default:
		seq, err := strconv.ParseUint(opts.Deliver, 10, 64)
		if err != nil || seq == 0 {
			return cmdutil.Usagef("--deliver %q: use all, new or a stream sequence (1, 2, ...)", opts.Deliver)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq
	}
	b, err := f.Broker(ctx)
	if err != nil {
		return err
	}
	if _, err := b.JetStream().CreateConsumer(ctx, broker.Stream, cfg); err != nil {
		if errors.Is(err, jetstream.ErrConsumerExists) {
			return fmt.Errorf("consumer %q already exists with other settings; 'sylk consumer rm %s' first", opts.Name, opts.Name)
		}
		return fmt.Errorf("create consumer %q: %w", opts.Name, err)
	}
	url := b.URL()
	creds := ""
	if opts.Creds {
		if creds, err = issueCreds(f, opts.Name); err != nil {
			return err
		}
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"stream": broker.Stream, "consumer": opts.Name, "filter": filter, "deliver": opts.Deliver, "url": url, "creds": creds})
	}
	out := f.IO.Out
	fmt.Fprintf(out, "consumer %s on stream %s: filter %s, deliver %s, explicit ack\n", opts.Name, broker.Stream, filter, opts.Deliver)
	if url == "" {
		fmt.Fprintf(out, "note: no server is listening on %s; start 'sylk serve' so outside clients can connect\n", b.Options().DataDir)
		url = "nats://" + broker.DefaultListen
	}
	credsFlag := ""
	if creds != "" {
		fmt.Fprintf(out, "read-only credentials for it: %s\n", creds)
		credsFlag = " --creds " + creds
	}
	fmt.Fprintf(out, `connect to %s (the admin's credentials are named in %s/%s)
  nats CLI:  nats --server %s%s consumer next %s %s --count 10
  Go:        cons, _ := js.Consumer(ctx, %q, %q); cons.Consume(func(m jetstream.Msg) { ...; m.Ack() })
bodies are msgpack envelopes; headers Sylk-Session, Sylk-Type, Sylk-Source, Sylk-Target
say what each is without decoding; 'sylk schema TYPE' prints each type's JSON Schema
`, url, b.Options().DataDir, broker.InfoFile, url, credsFlag, broker.Stream, opts.Name, broker.Stream, opts.Name)
	return nil
}

// issueCreds issues the credential that reads consumer name only.
func issueCreds(f *cmdutil.Factory, name string) (string, error) {
	if f.Cfg.NATSURL != "" {
		return "", cmdutil.Usagef("--issue-creds issues credentials from the data directory's keys; with --nats-url they are elsewhere")
	}
	a, err := broker.LoadAuth(f.BrokerOptions().DataDir)
	if err != nil {
		return "", err
	}
	r, err := broker.ParseRole(broker.RoleConsumer + ":" + name)
	if err != nil {
		return "", cmdutil.UsageError{Err: err}
	}
	u, err := a.AddUser(name, r)
	if err != nil {
		return "", err
	}
	return u.Creds, nil
}

func newConsumerLsCmd(f *cmdutil.Factory) *cobra.Command {
	var asJSON, all bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the durable consumers of the event log with their progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := f.Broker(ctx)
			if err != nil {
				return err
			}
			s, err := b.JetStream().Stream(ctx, broker.Stream)
			if err != nil {
				return err
			}
			type row struct {
				Name       string `json:"name"`
				Filter     string `json:"filter"`
				Pending    uint64 `json:"pending"`
				AckPending int    `json:"ack_pending"`
				Redeliver  int    `json:"redelivered"`
				AckFloor   uint64 `json:"ack_floor"`
			}
			var rows []row
			lister := s.ListConsumers(ctx)
			for info := range lister.Info() {
				if info.Config.Durable == "" && !all {
					continue // ordered readers (tails, projectors) come and go
				}
				filter := info.Config.FilterSubject
				if filter == "" && len(info.Config.FilterSubjects) > 0 {
					filter = fmt.Sprint(info.Config.FilterSubjects)
				}
				rows = append(rows, row{info.Name, filter, info.NumPending, info.NumAckPending, info.NumRedelivered, info.AckFloor.Stream})
			}
			if err := lister.Err(); err != nil {
				return err
			}
			if asJSON {
				if rows == nil {
					rows = []row{}
				}
				return f.IO.PrintJSON(rows)
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tFILTER\tPENDING\tACK PENDING\tREDELIVERED\tACK FLOOR")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", r.Name, r.Filter, r.Pending, r.AckPending, r.Redeliver, r.AckFloor)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVar(&all, "all", false, "also the ephemeral consumers of tails, scans and projectors")
	return cmd
}

func newConsumerRmCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Delete a durable consumer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := f.Broker(ctx)
			if err != nil {
				return err
			}
			if err := b.JetStream().DeleteConsumer(ctx, broker.Stream, args[0]); err != nil {
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					return fmt.Errorf("no consumer %q; 'sylk consumer ls' lists them", args[0])
				}
				return err
			}
			fmt.Fprintf(f.IO.Out, "consumer %s deleted\n", args[0])
			return nil
		},
	}
}
