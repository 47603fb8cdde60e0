package skill

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/skills"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
)

type loadoutOptions struct {
	Session, Agent string
	JSON           bool
}

func newCmdLoadout(f *cmdutil.Factory) *cobra.Command {
	opts := &loadoutOptions{}
	cmd := &cobra.Command{
		Use:   "loadout SESSION",
		Short: "Show what each agent loaded in a session: skills, tool schemas, refusals",
		Long: `Show the loadouts of a session, from the skills projection: for each agent,
the skills its selections loaded (with the reason), the tools whose schemas it
loaded (at a node's start or by request_tools), the tools it was refused, and
the tools that expired: unused for longer than the TTL (30 minutes), a node
starts without them.

With a server running it asks the server (sylk.api.loadout.get and
sylk.api.loadout.list); without, it reads the local projections.`,
		Example: `  sylk skill loadout s-1a2b3c4d
  sylk skill loadout s-1a2b3c4d --agent engineer --json | jq -r '.tools[].name'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Session = args[0]
			return loadoutRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "only this agent's loadout (engineer, inspector, tester, ...)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON: the loadout with --agent, else the list of them")
	return cmd
}

func loadoutRun(ctx context.Context, f *cmdutil.Factory, opts *loadoutOptions) error {
	if opts.Agent != "" && !skills.ValidName(opts.Agent) {
		return cmdutil.Usagef("--agent %q: not an agent name", opts.Agent)
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := r.Session(ctx, opts.Session); err != nil {
		return cmdutil.SessionNotFound(opts.Session, err)
	}
	var los []*projections.Loadout
	if opts.Agent != "" {
		lo, err := r.Loadout(ctx, opts.Session, opts.Agent)
		if err != nil {
			return fmt.Errorf("%w (the agent ran no prompt node in this session)", err)
		}
		if opts.JSON {
			return f.IO.PrintJSON(lo)
		}
		los = []*projections.Loadout{lo}
	} else if los, err = r.Loadouts(ctx, opts.Session); err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(los)
	}
	if len(los) == 0 {
		fmt.Fprintf(f.IO.ErrOut, "no agent loaded skills or tools in session %s (only prompt nodes do)\n", opts.Session)
		return nil
	}
	return printLoadouts(f.IO.Out, los)
}

// printLoadouts prints one line per skill, tool, refusal and expired tool.
func printLoadouts(out io.Writer, los []*projections.Loadout) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tKIND\tNAME\tNODE\tSEQ\tHOW")
	for _, lo := range los {
		for _, s := range lo.Skills {
			fmt.Fprintf(tw, "%s\tskill\t%s\t%s\t%d\t%s\n", lo.Agent, s.Name, orDash(s.Node), s.Seq, s.Reason)
		}
		for _, t := range lo.Tools {
			fmt.Fprintf(tw, "%s\ttool\t%s\t%s\t%d\t%s\n", lo.Agent, t.Name, orDash(t.Node), t.Seq, t.Via)
		}
		for _, r := range lo.Refused {
			fmt.Fprintf(tw, "%s\trefused\t%s\t-\t%d\t%s\n", lo.Agent, orDash(r.Name), r.Seq, r.Reason)
		}
		for _, u := range lo.Unloaded {
			fmt.Fprintf(tw, "%s\tunloaded\t%s\t%s\t%d\t%s\n", lo.Agent, u.Name, orDash(u.Node), u.Seq, u.Reason)
		}
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
