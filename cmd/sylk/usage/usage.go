// Package usage is `sylk usage`: the tokens and cost of the LLM calls, per
// session, agent, model and task, against the budgets.
package usage

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/internal/render"
	"github.com/sylk/sylk/schemas"
)

// UsageOptions are the flags of `sylk usage`.
type UsageOptions struct {
	Session string
	JSON    bool
}

func NewCmdUsage(f *cmdutil.Factory) *cobra.Command {
	opts := &UsageOptions{}
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show the tokens and cost of the LLM calls, per session, agent, model and task",
		Long: `Show what the LLM calls cost: calls, prompt and completion tokens and, when
prices are configured (llm.prices in the config), dollars; in total, per
session, per agent, per model and per DAG node; and what the budgets leave.

The figures are read from the event log: every LLM call records an llm_usage
event, and this command folds them (the same ledger the budgets are checked
against), so they cover every process that shared the data directory. A call
answered from its record (a redelivery, a replay) costs nothing and is not
counted again.`,
		Example: `  sylk usage
  sylk usage --session s-1a2b3c4d
  sylk usage --json | jq '.by_agent.architect.total_tokens'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Session != "" {
				if err := schemas.CheckName("--session", opts.Session); err != nil {
					return cmdutil.UsageError{Err: err}
				}
			}
			return usageRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Session, "session", "", "only this session's calls")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the report as one JSON object")
	return cmd
}

// usageJSON is what `sylk usage --json` prints.
type usageJSON struct {
	Session string `json:"session,omitempty"`
	llm.Report
	// ByTask replaces the report's, in snake case.
	ByTask  []llm.TaskUsage `json:"by_task,omitempty"`
	Budgets llm.Budgets     `json:"budgets"`
}

func usageRun(ctx context.Context, f *cmdutil.Factory, opts *UsageOptions) error {
	log, err := f.Log(ctx)
	if err != nil {
		return err
	}
	ledger := llm.NewLedger()
	if _, err := ledger.Read(ctx, log, opts.Session, 0); err != nil {
		return err
	}
	rep := ledger.Report(opts.Session)
	budgets := f.Cfg.LLM.Budgets
	if opts.JSON {
		return f.IO.PrintJSON(usageJSON{Session: opts.Session, Report: rep, ByTask: rep.Tasks(), Budgets: budgets})
	}
	w := f.IO.Out
	scope := "all sessions"
	if opts.Session != "" {
		scope = "session " + opts.Session
	}
	if rep.Total.Calls == 0 {
		fmt.Fprintf(f.IO.ErrOut, "no LLM calls recorded in %s\n", scope)
		return nil
	}
	fmt.Fprintf(w, "LLM usage, %s: %s\n", scope, totalsLine(rep.Total))
	if opts.Session == "" {
		printTotals(w, "SESSION", rep.BySession)
	}
	printTotals(w, "AGENT", rep.ByAgent)
	printTotals(w, "MODEL", rep.ByModel)
	if len(rep.ByTask) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tSESSION\tCALLS\tPROMPT\tCOMPLETION\tTOTAL")
		for _, t := range rep.ByTask {
			fmt.Fprintf(tw, "%s/%s\t%s\t%d\t%d\t%d\t%d\n", cmdutil.TruncateRunes(t.Scope.DAGID, 13), t.Scope.NodeID, t.Scope.Session,
				t.Totals.Calls, t.Totals.PromptTokens, t.Totals.CompletionTokens, t.Totals.TotalTokens)
		}
		tw.Flush()
	}
	printBudgets(w, budgets, rep, opts.Session)
	return nil
}

func totalsLine(t llm.Totals) string {
	s := fmt.Sprintf("%d calls, %d tokens (%d prompt, %d completion)", t.Calls, t.TotalTokens, t.PromptTokens, t.CompletionTokens)
	if t.CostUSD > 0 {
		s += fmt.Sprintf(", $%.4f", t.CostUSD)
	}
	return s
}

func printTotals(w io.Writer, what string, m map[string]llm.Totals) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tCALLS\tPROMPT\tCOMPLETION\tTOTAL\tCOST\n", what)
	for _, k := range keys {
		t := m[k]
		cost := "-"
		if t.CostUSD > 0 {
			cost = fmt.Sprintf("$%.4f", t.CostUSD)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", render.OrDash(k), t.Calls, t.PromptTokens, t.CompletionTokens, t.TotalTokens, cost)
	}
	tw.Flush()
}

// printBudgets says what the configured budgets leave.
func printBudgets(w io.Writer, b llm.Budgets, rep llm.Report, session string) {
	if b == (llm.Budgets{}) {
		return
	}
	fmt.Fprintln(w)
	left := func(limit, spent int64) string {
		return fmt.Sprintf("%d of %d tokens spent, %d left", spent, limit, max(0, limit-spent))
	}
	if b.Global > 0 && session == "" {
		fmt.Fprintf(w, "global budget: %s\n", left(b.Global, rep.Total.TotalTokens))
	}
	if b.Session > 0 {
		if session != "" {
			fmt.Fprintf(w, "session budget: %s\n", left(b.Session, rep.Total.TotalTokens))
		} else {
			fmt.Fprintf(w, "session budget: %d tokens per session\n", b.Session)
		}
	}
	if b.Task > 0 {
		fmt.Fprintf(w, "task budget: %d tokens per DAG node\n", b.Task)
	}
}
