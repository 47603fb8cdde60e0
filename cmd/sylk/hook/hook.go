// Package hook is `sylk hook`: the hooks the agents run, in their order.
package hook

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// NewCmdHook is `sylk hook`.
func NewCmdHook(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "The hooks that run around the agents' messages, LLM calls and tool calls",
		Long: `Hooks run at six points of an agent's work: pre_message and post_message around
the handling of a message, pre_prompt and post_prompt around an LLM call, pre_tool
and post_tool around a tool call. At each point they run by priority (first,
early, normal, late, last), ties in the order they were declared: the built-in
hooks first, then the configuration's ` + "`hooks:`" + ` list. Each decision that changes
something is a hook_decision event ('sylk tail --type hook_decision').`,
		Example: `  sylk hook ls
  sylk hook ls --json | jq '.[] | select(.point == "pre_tool")'`,
	}
	cmd.AddCommand(newCmdList(f))
	return cmd
}

// entry is one hook in the listing.
type entry struct {
	Point    string   `json:"point"`
	Order    int      `json:"order"`
	Priority int      `json:"priority"`
	Name     string   `json:"name"`
	Source   string   `json:"source"`
	Agents   []string `json:"agents,omitempty"`
	Trigger  []string `json:"trigger,omitempty"`
	Fail     string   `json:"fail"`
	Command  []string `json:"command,omitempty"`
	Timeout  string   `json:"timeout,omitempty"`
}

func newCmdList(f *cmdutil.Factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the hooks of every point in the order they run",
		Long: `List the effective hooks: for each point, the hooks in the order they run, with
their priority, where they come from (builtin, or config for the configuration's
hooks: list), the agents and tools they are limited to, what a failure means
(open: the call goes on; closed: it is blocked) and a user hook's command and
timeout. token_budget is listed when an LLM is configured.`,
		Example: `  sylk hook ls
  sylk hook ls --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := f.RuntimeConfig()
			p, err := cfg.Pipeline()
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			var out []entry
			for _, pt := range hooks.Points() {
				for i, h := range p.Order(pt) {
					e := entry{Point: pt.String(), Order: i + 1, Priority: int(h.Priority), Name: h.Name, Source: h.Source,
						Agents: h.Agents, Trigger: h.Trigger, Fail: "open", Command: h.Command}
					if h.FailClosed {
						e.Fail = "closed"
					}
					if h.Timeout > 0 {
						e.Timeout = h.Timeout.String()
					}
					out = append(out, e)
				}
			}
			if asJSON {
				return f.IO.PrintJSON(out)
			}
			w := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "POINT\t#\tPRIORITY\tHOOK\tSOURCE\tAGENTS\tTRIGGER\tFAIL\tCOMMAND")
			for _, e := range out {
				command := "-"
				if len(e.Command) > 0 {
					command = strings.Join(e.Command, " ") + " (timeout " + e.Timeout + ")"
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Point, e.Order, hooks.Priority(e.Priority), e.Name, e.Source,
					orAll(e.Agents), trigger(e), e.Fail, command)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the hooks as a JSON array")
	return cmd
}

// trigger is the tools a tool point's hook is limited to; other points have
// none.
func trigger(e entry) string {
	if !strings.HasSuffix(e.Point, "_tool") {
		return "-"
	}
	return orAll(e.Trigger)
}

func orAll(xs []string) string {
	if len(xs) == 0 {
		return "all"
	}
	return strings.Join(xs, ",")
}
