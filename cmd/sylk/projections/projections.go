// Package projections is `sylk projections`: the projections store's status,
// rebuild and verify.
package projections

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	projs "github.com/sylk/sylk/projections"
)

// ProjectionsOptions are the flags of `sylk projections`.
type ProjectionsOptions struct {
	JSON bool
}

func NewCmdProjections(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "projections",
		Short: "Status, rebuild and verification of the Pebble projections",
		Long: `All state is a fold of the event log into Pebble (<data>/projections): sessions,
DAGs, checkpoints, pending requests, session logs, traces and recorded calls.
Each projection has a cursor (the last stream sequence it applied) and a
version; a changed version is rebuilt on start, and a store that does not open
is moved aside and rebuilt. With 'sylk serve' running these commands ask the
server; otherwise they open the store themselves.`,
	}
	cmd.AddCommand(newProjectionsStatusCmd(f), newProjectionsRebuildCmd(f), newProjectionsVerifyCmd(f))
	return cmd
}

func newProjectionsStatusCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ProjectionsOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Cursor, lag, size and rejected events of each projection",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			st, err := r.Status(cmd.Context())
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(st)
			}
			printStatus(f, st, r.Client != nil)
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the status as JSON")
	return cmd
}

func printStatus(f *cmdutil.Factory, st *projs.Status, server bool) {
	where := "this process (no server running)"
	if server {
		where = "the server"
	}
	fmt.Fprintf(f.IO.Out, "projections in %s, kept by %s: applied %d of %d\n", st.Dir, where, st.Applied, st.StreamLast)
	if st.Rebuild != nil {
		fmt.Fprintf(f.IO.Out, "rebuilding: %d of %d events, %.0f/s\n", st.Rebuild.Done, st.Rebuild.Total, st.Rebuild.PerSec)
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PROJECTION\tVERSION\tCURSOR\tLAG\tSIZE\tREJECTED\t")
	for _, p := range st.Projections {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t\n", p.Name, p.Version, p.Cursor, p.Lag, humanBytes(p.SizeBytes), p.Rejected)
	}
	tw.Flush()
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// rebuildResult is what `projections rebuild --json` prints.
type rebuildResult struct {
	Events  uint64  `json:"events"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
	Applied uint64  `json:"applied"`
}

func newProjectionsRebuildCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ProjectionsOptions{}
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Drop every projection and fold the whole stream again",
		Long: `Drop every projection and fold the stream from its first event, with a progress
bar and the rate on a terminal. With 'sylk serve' running the server does it
and keeps answering; this command follows its progress.

Without a server, this process rebuilds the store with 128 MiB memtables and
a cache of decoded objects bounded at 256 MiB, and while it folds its Go
collector runs at GOGC 200 with a heap limit 640 MiB above what the process
held when the rebuild began (the embedded server's index of the stream);
GOMEMLIMIT replaces the limit. It writes no write-ahead log: the store is
marked unfinished until the whole stream is folded, and a store found so is
rebuilt again when opened, so an interrupted rebuild is redone, never left
half done. Ctrl-C or SIGTERM stops it at once, leaving the store so.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return projectionsRebuildRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the result as JSON")
	return cmd
}

func projectionsRebuildRun(ctx context.Context, f *cmdutil.Factory, opts *ProjectionsOptions) error {
	// The rebuild drops everything and marks the store unfinished until it
	// has folded the whole stream, so a crash is redone from the stream
	// anyway: the store keeps no write-ahead log (projections.Options.NoWAL).
	r, err := f.OpenStateWith(ctx, false, projs.Options{}.ForRebuild())
	if err != nil {
		return err
	}
	defer r.Close()
	start := time.Now()
	var res rebuildResult
	if r.Client != nil {
		res, err = rebuildOnServer(ctx, f, r)
	} else {
		var last projs.Progress
		var bar = progressBarFor(f)
		err = r.Store.Projector(r.Log).Rebuild(ctx, func(p projs.Progress) {
			last = p
			bar.update(p)
		})
		bar.finish()
		res = rebuildResult{Events: last.Done, Applied: r.Store.Cursor()}
		if err == nil {
			// Without a log, closing is what writes the last of the
			// rebuild to disk: its error is the rebuild's.
			err = r.Store.Close()
		}
	}
	if err != nil {
		return err
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Seconds > 0 {
		res.PerSec = float64(res.Events) / res.Seconds
	}
	if opts.JSON {
		return f.IO.PrintJSON(res)
	}
	fmt.Fprintf(f.IO.Out, "rebuilt the projections from %d events in %.2fs (%.0f events/s), applied up to seq %d\n", res.Events, res.Seconds, res.PerSec, res.Applied)
	return nil
}

// rebuildOnServer asks the server to rebuild and follows its progress.
func rebuildOnServer(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader) (rebuildResult, error) {
	target, err := r.Log.LastSeq(ctx)
	if err != nil {
		return rebuildResult{}, err
	}
	if _, err := r.Client.Rebuild(ctx); err != nil {
		return rebuildResult{}, err
	}
	bar := progressBarFor(f)
	defer bar.finish()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := r.Client.Status(ctx)
		if err != nil {
			return rebuildResult{}, err
		}
		if st.Rebuild != nil {
			bar.update(*st.Rebuild)
		}
		if st.Rebuild == nil && st.Applied >= target {
			return rebuildResult{Events: target, Applied: st.Applied}, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return rebuildResult{}, ctx.Err()
		}
	}
}

// rebuildBar draws rebuild progress on a terminal.
type rebuildBar struct {
	f     *cmdutil.Factory
	total int64
	bar   interface {
		ChangeMax64(int64)
		Set64(int64) error
		Finish() error
	}
}

func progressBarFor(f *cmdutil.Factory) *rebuildBar { return &rebuildBar{f: f} }

func (b *rebuildBar) update(p projs.Progress) {
	if !b.f.IO.Terminal || p.Total == 0 {
		return
	}
	if b.bar == nil {
		pb := cmdutil.ProgressBar(b.f.IO, int64(p.Total), "rebuilding")
		if pb == nil {
			return
		}
		b.bar = pb
	}
	if int64(p.Total) != b.total {
		b.total = int64(p.Total)
		b.bar.ChangeMax64(b.total)
	}
	b.bar.Set64(int64(p.Done))
}

func (b *rebuildBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
		b.bar = nil
	}
}

func newProjectionsVerifyCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &ProjectionsOptions{}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Rebuild the projections in memory and compare them key by key",
		Long: `Fold the stream again into an in-memory Pebble, each projection up to the
cursor of the live one, and compare the two key by key. Exit 0 if they are
identical; exit 1 naming the first key that differs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			rep, err := r.Verify(cmd.Context())
			if err != nil && !errors.Is(err, projs.ErrVerify) {
				return err
			}
			if opts.JSON {
				if perr := f.IO.PrintJSON(rep); perr != nil {
					return perr
				}
			} else if rep.Difference == nil {
				fmt.Fprintf(f.IO.Out, "ok: %d keys identical to a rebuild at seq %d (%.2fs)\n", rep.Keys, rep.Applied, rep.Seconds)
			}
			if rep.Difference != nil {
				fmt.Fprintf(f.IO.ErrOut, "projections differ from a rebuild at seq %d: first difference after %d keys: %s\n", rep.Applied, rep.Keys, rep.Difference)
				return cmdutil.ErrSilent
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as JSON")
	return cmd
}
