package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/schemas"
)

// PrintPlan shows a plan: its id, its nodes in order with what each does and
// what it waits for, and the Architect's reasons.
func PrintPlan(w io.Writer, session string, env *schemas.Envelope, p *schemas.PlanResponse) {
	nodes := "nodes"
	if len(p.DAG.Nodes) == 1 {
		nodes = "node"
	}
	fmt.Fprintf(w, "Plan %s (session %s): %s, %d %s\n", p.PlanID, session, OrDash(p.DAG.Name), len(p.DAG.Nodes), nodes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, n := range p.DAG.Nodes {
		fmt.Fprintf(tw, "  %d. %s\t%s\t%s", i+1, n.ID, n.Agent, NodeAction(n))
		if len(n.DependsOn) > 0 {
			fmt.Fprintf(tw, "\tafter %s", strings.Join(n.DependsOn, ", "))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if p.Rationale != "" {
		fmt.Fprintf(w, "Why: %s\n", p.Rationale)
	}
	for _, c := range env.ConfidenceChain {
		if c.Agent == "architect" {
			fmt.Fprintf(w, "Confidence: %.2f\n", c.Confidence)
		}
	}
}

// NodeAction says in a few words what a node does.
func NodeAction(n schemas.Node) string {
	if n.Prompt != "" {
		return "prompt: " + cmdutil.TruncateRunes(FirstLine(n.Prompt), 70)
	}
	var what string
	switch {
	case n.Args["argv"] != nil:
		if argv, ok := n.Args["argv"].([]any); ok {
			parts := make([]string, len(argv))
			for i, a := range argv {
				parts[i] = fmt.Sprint(a)
			}
			what = strings.Join(parts, " ")
		}
	case n.Args["command"] != nil:
		what = fmt.Sprint(n.Args["command"])
	case n.Args["path"] != nil:
		what = fmt.Sprint(n.Args["path"])
	}
	if what == "" && len(n.Args) > 0 {
		b, _ := json.Marshal(n.Args) // keys sorted
		what = string(b)
	}
	return cmdutil.TruncateRunes(n.Tool+": "+FirstLine(what), 70)
}
