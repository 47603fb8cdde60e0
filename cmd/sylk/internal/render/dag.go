package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
)

// DAGProgress says where a DAG is: its state, layer and node counts.
func DAGProgress(d *projections.DAG) string {
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

// PrintDAG shows a DAG: its progress, layers and each node's state and work.
func PrintDAG(w io.Writer, d *projections.DAG) {
	fmt.Fprintf(w, "dag %s in session %s: %s\n", d.ID, d.Session, DAGProgress(d))
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
			work = cmdutil.TruncateRunes(strings.ReplaceAll(n.Prompt, "\n", " "), 30)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Layer, n.State, attemptOf(n), OrDash(n.Agent), OrDash(work), nodeDetail(n))
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
		parts = append(parts, cmdutil.TruncateRunes(n.Result.Summary, 60))
	case n.LastError != "":
		parts = append(parts, "error: "+cmdutil.TruncateRunes(n.LastError, 60))
	case n.SkipReason != "":
		parts = append(parts, cmdutil.TruncateRunes(n.SkipReason, 60))
	case n.Help != "":
		parts = append(parts, "needs help: "+cmdutil.TruncateRunes(n.Help, 60))
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
