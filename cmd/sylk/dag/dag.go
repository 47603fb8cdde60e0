// Package dag is `sylk dag` and `sylk checkpoint`: the DAGs the projections
// hold, as text, JSON or Graphviz, and their checkpoints.
package dag

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/projections"
)

// DAGOptions are the flags of `sylk dag` and `sylk checkpoint`.
type DAGOptions struct {
	ID      string
	Session string
	State   string
	DAG     string
	Dot     bool
	JSON    bool
}

func NewCmdDAG(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dag",
		Short: "List DAGs and show one's progress (or draw it with Graphviz)",
	}
	cmd.AddCommand(newDAGListCmd(f), newDAGShowCmd(f))
	return cmd
}

func newDAGListCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &DAGOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List DAGs with their progress",
		Example: `  sylk dag list
  sylk dag list --session S1 --state running
  sylk dag list --json | jq -r 'select(.state=="failed") | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return dagListRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "only this session's DAGs")
	cmd.Flags().StringVar(&opts.State, "state", "", "only DAGs in this state (running, succeeded, failed, cancelled, rejected)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per DAG")
	return cmd
}

func dagListRun(ctx context.Context, f *cmdutil.Factory, opts *DAGOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	dags, err := r.DAGs(ctx, projections.DAGFilter{Session: opts.Session, State: projections.DAGState(opts.State)})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, d := range dags {
			if err := f.IO.PrintJSON(d); err != nil {
				return err
			}
		}
		return nil
	}
	if len(dags) == 0 {
		fmt.Fprintln(f.IO.ErrOut, "no DAGs")
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tNAME\tPROGRESS\tSUBMITTED")
	for _, d := range dags {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Session, render.OrDash(d.Name), render.DAGProgress(d), d.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func newDAGShowCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &DAGOptions{}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a DAG: layers, each node's state, attempts, results and errors",
		Example: `  sylk dag show build
  sylk dag show build --session S1
  sylk dag show build --dot | dot -Tsvg > build.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.Dot && opts.JSON {
				return cmdutil.Usagef("--dot and --json: choose one")
			}
			return dagShowRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "the session, when several have a DAG with this id")
	cmd.Flags().BoolVar(&opts.Dot, "dot", false, "print the DAG as a Graphviz digraph, nodes coloured by state")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the DAG as JSON")
	return cmd
}

func dagShowRun(ctx context.Context, f *cmdutil.Factory, opts *DAGOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	var d *projections.DAG
	if opts.Session != "" {
		d, err = r.SessionDAG(ctx, opts.Session, opts.ID)
	} else {
		d, err = r.DAG(ctx, opts.ID)
	}
	if err != nil {
		return fmt.Errorf("%w ('sylk dag list' shows the DAGs)", err)
	}
	switch {
	case opts.JSON:
		return f.IO.PrintJSON(d)
	case opts.Dot:
		return writeDot(f.IO.Out, d)
	}
	render.PrintDAG(f.IO.Out, d)
	return nil
}

// dotColors are the fill colours of node states.
var dotColors = map[projections.NodeState]string{
	projections.NodePending:    "white",
	projections.NodeReady:      "lightyellow",
	projections.NodeDispatched: "lightblue",
	projections.NodeRunning:    "deepskyblue",
	projections.NodeSucceeded:  "palegreen",
	projections.NodeFailed:     "salmon",
	projections.NodeSkipped:    "lightgrey",
	projections.NodeCancelled:  "grey",
}

// writeDot draws the DAG as a Graphviz digraph: one rank per layer, an edge
// from each dependency, nodes filled by state.
func writeDot(w io.Writer, d *projections.DAG) error {
	q := strconv.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", q(d.ID))
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n  rankdir=LR;\n", q(fmt.Sprintf("%s (%s): %s", d.ID, d.Session, d.State)))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n")
	for i, layer := range d.Layers {
		fmt.Fprintf(&b, "  { rank=same; /* layer %d */", i)
		for _, id := range layer {
			b.WriteString(" " + q(id) + ";")
		}
		b.WriteString(" }\n")
	}
	for _, n := range d.Nodes {
		label := n.ID + "\n" + string(n.State)
		if n.Attempt > 1 {
			label += fmt.Sprintf(" (attempt %d)", n.Attempt)
		}
		if n.Tool != "" {
			label += "\n" + n.Tool
		}
		fmt.Fprintf(&b, "  %s [label=%s, fillcolor=%s];\n", q(n.ID), q(label), q(dotColors[n.State]))
	}
	for _, n := range d.Nodes {
		for _, dep := range n.DependsOn {
			fmt.Fprintf(&b, "  %s -> %s;\n", q(dep), q(n.ID))
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func NewCmdCheckpoint(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "List a session's checkpoints",
	}
	opts := &DAGOptions{}
	list := &cobra.Command{
		Use:     "list SESSION",
		Aliases: []string{"ls"},
		Short:   "List a session's checkpoints: each completed DAG layer and the stream sequence it stands at",
		Long: `A checkpoint marks a DAG layer as done; its sequence is the point in the stream
from which the DAG resumes ('sylk replay SESSION --until SEQ --state' shows the
state there).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Session = args[0]
			return checkpointListRun(cmd.Context(), f, opts)
		},
	}
	list.Flags().StringVar(&opts.DAG, "dag", "", "only this DAG's checkpoints")
	list.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per checkpoint")
	cmd.AddCommand(list)
	return cmd
}

func checkpointListRun(ctx context.Context, f *cmdutil.Factory, opts *DAGOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Session(ctx, opts.Session); err != nil {
		return cmdutil.SessionNotFound(opts.Session, err)
	}
	cps, err := r.Checkpoints(ctx, opts.Session, opts.DAG)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, c := range cps {
			if err := f.IO.PrintJSON(c); err != nil {
				return err
			}
		}
		return nil
	}
	if len(cps) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "no checkpoints in session %s\n", opts.Session)
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tDAG\tLAYER\tSUCCEEDED\tFAILED\tSKIPPED\tAT")
	for _, c := range cps {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Seq, c.DAG, c.Layer, render.ListOrDash(c.Succeeded), render.ListOrDash(c.Failed), render.ListOrDash(c.Skipped), c.At.Local().Format(time.DateTime))
	}
	return tw.Flush()
}
