package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

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

func newDAGCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dag",
		Short: "List DAGs and show one's progress (or draw it with Graphviz)",
	}
	cmd.AddCommand(newDAGListCmd(f), newDAGShowCmd(f))
	return cmd
}

func newDAGListCmd(f *Factory) *cobra.Command {
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

// dagProgress says where a DAG is: its state, layer and node counts.
func dagProgress(d *projections.DAG) string {
	var counts []string
	for _, s := range projections.NodeStates {
		if n := d.Counts[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	layer := ""
	if len(d.Layers) > 0 {
		layer = fmt.Sprintf(", layer %d/%d", min(d.CurrentLayer+1, len(d.Layers)), len(d.Layers))
	}
	return fmt.Sprintf("%s%s (%s)", d.State, layer, strings.Join(counts, ", "))
}

func dagListRun(ctx context.Context, f *Factory, opts *DAGOptions) error {
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
			if err := f.IO.printJSON(d); err != nil {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.ID, d.Session, orDash(d.Name), dagProgress(d), d.CreatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func newDAGShowCmd(f *Factory) *cobra.Command {
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
				return usagef("--dot and --json: choose one")
			}
			return dagShowRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "the session, when several have a DAG with this id")
	cmd.Flags().BoolVar(&opts.Dot, "dot", false, "print the DAG as a Graphviz digraph, nodes coloured by state")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the DAG as JSON")
	return cmd
}

func dagShowRun(ctx context.Context, f *Factory, opts *DAGOptions) error {
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
		return f.IO.printJSON(d)
	case opts.Dot:
		return writeDot(f.IO.Out, d)
	}
	printDAG(f.IO.Out, d)
	return nil
}

func printDAG(w io.Writer, d *projections.DAG) {
	fmt.Fprintf(w, "dag %s in session %s: %s\n", d.ID, d.Session, dagProgress(d))
	if d.Name != "" {
		fmt.Fprintf(w, "  name:      %s\n", d.Name)
	}
	fmt.Fprintf(w, "  submitted: %s by %s (seq %d)\n", d.CreatedAt.Local().Format(time.DateTime), d.SubmittedBy, d.CreatedSeq)
	if d.FinishedAt != nil {
		fmt.Fprintf(w, "  finished:  %s\n", d.FinishedAt.Local().Format(time.DateTime))
	}
	if d.Outcome != nil {
		fmt.Fprintf(w, "  outcome:   %s: %s\n", d.Outcome.Outcome, d.Outcome.Summary)
	}
	for _, p := range d.Problems {
		fmt.Fprintf(w, "  problem:   %s\n", p)
	}
	for i, layer := range d.Layers {
		mark := " "
		if i == d.CurrentLayer {
			mark = ">"
		}
		fmt.Fprintf(w, "  %s layer %d: %s\n", mark, i, strings.Join(layer, " "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tLAYER\tSTATE\tATTEMPT\tAGENT\tWORK\tDETAIL")
	for _, n := range d.Nodes {
		work := n.Tool
		if work == "" {
			work = truncateRunes(strings.ReplaceAll(n.Prompt, "\n", " "), 30)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Layer, n.State, attemptOf(n), orDash(n.Agent), orDash(work), nodeDetail(n))
	}
	tw.Flush()
}

func attemptOf(n *projections.Node) string {
	if n.Attempt == 0 {
		return "-"
	}
	return strconv.Itoa(n.Attempt)
}

func nodeDetail(n *projections.Node) string {
	var parts []string
	if len(n.DependsOn) > 0 {
		parts = append(parts, "after "+strings.Join(n.DependsOn, ","))
	}
	switch {
	case n.Result != nil && n.Result.Summary != "":
		parts = append(parts, truncateRunes(n.Result.Summary, 60))
	case n.LastError != "":
		parts = append(parts, "error: "+truncateRunes(n.LastError, 60))
	case n.SkipReason != "":
		parts = append(parts, truncateRunes(n.SkipReason, 60))
	case n.Help != "":
		parts = append(parts, "needs help: "+truncateRunes(n.Help, 60))
	}
	interrupted := 0
	for _, c := range n.Calls {
		if c.ResultSeq == 0 {
			interrupted++
		}
	}
	if len(n.Calls) > 0 {
		s := fmt.Sprintf("%d calls", len(n.Calls))
		if interrupted > 0 {
			s += fmt.Sprintf(" (%d without result)", interrupted)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
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

func newCheckpointCmd(f *Factory) *cobra.Command {
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

func checkpointListRun(ctx context.Context, f *Factory, opts *DAGOptions) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Session(ctx, opts.Session); err != nil {
		return sessionNotFound(opts.Session, err)
	}
	cps, err := r.Checkpoints(ctx, opts.Session, opts.DAG)
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, c := range cps {
			if err := f.IO.printJSON(c); err != nil {
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
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%s\n", c.Seq, c.DAG, c.Layer, listOrDash(c.Succeeded), listOrDash(c.Failed), listOrDash(c.Skipped), c.At.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

func listOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}
