// Package stream is `sylk stream`: the administration of the event log's
// streams on a cluster.
package stream

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func NewCmdStream(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Administer the event log's streams (SYLK, SYLK_DLQ)",
		Long: `The event log is the SYLK stream, its dead letters SYLK_DLQ. On a cluster
(sylk serve --cluster-listen, --routes) each keeps --replicas copies over the
members; these commands show and change that.`,
	}
	cmd.AddCommand(newReplicasCmd(f))
	return cmd
}

// ReplicasOptions are the flags of `sylk stream replicas`.
type ReplicasOptions struct {
	N    int // 0: show only
	JSON bool
}

func newReplicasCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ReplicasOptions{}
	cmd := &cobra.Command{
		Use:   "replicas [N]",
		Short: "Show, or change to N, the number of copies of the streams",
		Long: `Without N, show each stream's copies: how many, the member leading it, the
others and which of them are up to date.

With N, change both streams to N copies. The cluster copies the data to new
replicas (or drops removed ones) in the background; run it again without N
to watch them catch up. N may not exceed the number of cluster members that
are up, and a server outside a cluster keeps one copy.`,
		Example: `  sylk stream replicas
  sylk stream replicas 3          # after adding members to a one-member cluster
  sylk stream replicas 1 --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				n, err := strconv.Atoi(args[0])
				if err != nil || n < 1 {
					return cmdutil.Usagef("replicas %q: want a number of copies, 1 or more", args[0])
				}
				opts.N = n
			}
			return replicasRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print each stream's copies as JSON")
	return cmd
}

func replicasRun(ctx context.Context, f *cmdutil.Factory, opts *ReplicasOptions) error {
	b, err := f.Broker(ctx)
	if err != nil {
		return err
	}
	if opts.N > 0 {
		if err := broker.SetReplicas(ctx, b.JetStream(), opts.N); err != nil {
			return err
		}
	}
	reps, err := broker.Replicas(ctx, b.JetStream())
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(reps)
	}
	w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STREAM\tREPLICAS\tLEADER\tPEERS\tCURRENT")
	for _, r := range reps {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", r.Stream, r.Replicas, dash(r.Leader), dash(strings.Join(r.Peers, ",")), dash(strings.Join(r.Current, ",")))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
