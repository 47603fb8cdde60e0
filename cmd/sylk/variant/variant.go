// Package variant is `sylk variant`: other approaches to a DAG step, run side
// by side in git worktrees, compared and one selected.
package variant

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	agentpipeline "github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Options are the flags of `sylk variant`.
type Options struct {
	Session string
	DAG     string
	JSON    bool
}

func NewCmdVariant(f *cmdutil.Factory) *cobra.Command {
	opts := &Options{}
	cmd := &cobra.Command{
		Use:   "variant",
		Short: "Try another approach to a step, compare the variants, select one",
		Long: `A variant is another pipeline for the same DAG step, started from the same
commit as the step's pipeline with an approach you describe, in a git worktree of
its own (the step's pipeline keeps the work directory). The step waits until
every variant has ended; then compare them and select one: its changes replace
the others' in the work directory and the worktrees are removed.

A variant is refused for a step that has finished, for a tool node, and outside
a git repository; only a variant that ended ready can be selected.`,
		Example: `  sylk variant request cache "use a sync.Map instead of a mutex"
  sylk variant ls
  sylk variant show g-1a2b3c4d5e6f
  sylk variant diff g-1a2b3c4d5e6f v1              # v1 against the starting commit
  sylk variant diff g-1a2b3c4d5e6f original v1     # one variant against another
  sylk variant select g-1a2b3c4d5e6f v1`,
	}
	request := &cobra.Command{
		Use:   "request NODE APPROACH",
		Short: "Run another approach to a step as a variant",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return requestRun(cmd.Context(), f, opts, args[0], args[1])
		},
	}
	request.Flags().StringVar(&opts.DAG, "dag", "", "the DAG of the node (default: the running DAG that has it)")
	request.Flags().BoolVar(&opts.JSON, "json", false, "print the appended event as JSON")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List variant groups",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return lsRun(cmd.Context(), f, opts)
		},
	}
	ls.Flags().StringVar(&opts.Session, "session", "", "only this session's groups")
	ls.Flags().BoolVar(&opts.JSON, "json", false, "one JSON object per group")
	show := &cobra.Command{
		Use:   "show GROUP|NODE",
		Short: "A group's variants: approach, state, files",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return showRun(cmd.Context(), f, opts, args[0])
		},
	}
	show.Flags().BoolVar(&opts.JSON, "json", false, "the group as JSON")
	diff := &cobra.Command{
		Use:   "diff GROUP|NODE VARIANT [VARIANT]",
		Short: "A variant's changes from the starting commit, or two variants compared",
		Args:  cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return diffRun(cmd.Context(), f, args[0], args[1:])
		},
	}
	sel := &cobra.Command{
		Use:   "select GROUP|NODE VARIANT",
		Short: "Select a ready variant: merged into the work directory, the others removed",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return selectRun(cmd.Context(), f, opts, args[0], args[1])
		},
	}
	sel.Flags().BoolVar(&opts.JSON, "json", false, "print the appended event as JSON")
	cmd.AddCommand(request, ls, show, diff, sel)
	return cmd
}

// dagOf finds the DAG of a node: --dag, else the one running DAG that has it.
func dagOf(ctx context.Context, r projections.Reader, opts *Options, node string) (string, error) {
	if opts.DAG != "" {
		return opts.DAG, nil
	}
	dags, err := r.DAGs(ctx, projections.DAGFilter{State: projections.DAGRunning})
	if err != nil {
		return "", err
	}
	var found []string
	for _, d := range dags {
		for _, n := range d.Nodes {
			if n.ID == node {
				found = append(found, d.ID)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no running DAG has a node %q ('sylk dag list' shows the DAGs; --dag names one)", node)
	case 1:
		return found[0], nil
	}
	return "", cmdutil.Usagef("node %q is in %d running DAGs (%s): say which with --dag", node, len(found), strings.Join(found, ", "))
}

func requestRun(ctx context.Context, f *cmdutil.Factory, opts *Options, node, approach string) error {
	if strings.TrimSpace(approach) == "" {
		return cmdutil.Usagef("the approach is empty: say how this variant should do the step")
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	dag, err := dagOf(ctx, r, opts, node)
	if err != nil {
		return err
	}
	orig, err := agentpipeline.Original(ctx, r, dag, node)
	if err != nil {
		return fmt.Errorf("variant refused: %w", err)
	}
	if gs, err := r.VariantGroups(ctx, projections.PipelineFilter{DAG: dag, Node: node}); err != nil {
		return err
	} else if len(gs) > 0 && (gs[0].State == projections.GroupSelected || gs[0].State == projections.GroupCancelled) {
		return fmt.Errorf("variant refused: group %s of node %s is %s", gs[0].ID, node, gs[0].State)
	}
	env, err := schemas.New(schemas.TypeVariantRequest, orig.Session, "user", agentpipeline.Name, f.Now(),
		schemas.VariantRequest{DAGID: dag, NodeID: node, Approach: approach})
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "dag": dag, "node": node, "approach": approach})
	}
	fmt.Fprintf(f.IO.Out, "variant of node %s requested (seq %d): it starts from commit %s in a worktree of its own\n", node, seq, cmdutil.ShortCommit(orig.StartingCommit))
	fmt.Fprintf(f.IO.Out, "follow it: sylk variant show %s\n", node)
	return nil
}

func lsRun(ctx context.Context, f *cmdutil.Factory, opts *Options) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	gs, err := r.VariantGroups(ctx, projections.PipelineFilter{Session: opts.Session})
	if err != nil {
		return err
	}
	if opts.JSON {
		for _, g := range gs {
			if err := f.IO.PrintJSON(g); err != nil {
				return err
			}
		}
		return nil
	}
	if len(gs) == 0 {
		fmt.Fprintln(f.IO.ErrOut, `no variant groups: sylk variant request NODE "approach" starts one`)
		return nil
	}
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSESSION\tNODE\tSTATE\tVARIANTS\tSELECTED")
	for _, g := range gs {
		var vs []string
		for _, v := range g.Variants {
			vs = append(vs, v.ID+":"+string(v.State))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.ID, g.Session, g.Node, g.State, strings.Join(vs, " "), cmdutil.Dash(g.Selected))
	}
	return tw.Flush()
}

// group finds a group by id, or the group of a node of that name.
func group(ctx context.Context, r projections.Reader, ref string) (*projections.VariantGroup, error) {
	return cmdutil.ByIDOrNode(ctx, ref, "'sylk variant ls' lists the groups", r.VariantGroup, r.VariantGroups)
}

func showRun(ctx context.Context, f *cmdutil.Factory, opts *Options, ref string) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	g, err := group(ctx, r, ref)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(g)
	}
	w := f.IO.Out
	fmt.Fprintf(w, "group %s of node %s (DAG %s): %s, from commit %s\n", g.ID, g.Node, g.DAG, g.State, cmdutil.ShortCommit(g.StartingCommit))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIANT\tSTATE\tPIPELINE\tAPPROACH\tFILES")
	for _, v := range g.Variants {
		files := "-"
		if pl, err := r.Pipeline(ctx, v.Pipeline); err == nil && len(pl.FilesChanged) > 0 {
			files = strings.Join(pl.FilesChanged, ", ")
		}
		approach := v.Approach
		if v.Error != "" {
			approach += " (" + v.Error + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", v.ID, v.State, v.Pipeline, approach, files)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if g.State == projections.GroupPending {
		fmt.Fprintf(w, "compare: sylk variant diff %s VARIANT [VARIANT]; select: sylk variant select %s VARIANT\n", g.ID, g.ID)
	}
	return nil
}

// diffRun shows git's diff of a variant's end against the starting commit,
// or of two variants' ends, in the step's repository.
func diffRun(ctx context.Context, f *cmdutil.Factory, ref string, ids []string) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	g, err := group(ctx, r, ref)
	if err != nil {
		return err
	}
	var commits []string
	if len(ids) == 1 {
		commits = append(commits, g.StartingCommit)
	}
	for _, id := range ids {
		v := g.Variant(id)
		if v == nil {
			return fmt.Errorf("group %s has no variant %q ('sylk variant show %s')", g.ID, id, g.ID)
		}
		if v.EndCommit == "" {
			return fmt.Errorf("variant %s is %s: it has no finished work to compare", id, v.State)
		}
		commits = append(commits, v.EndCommit)
	}
	var dir string
	for _, v := range g.Variants {
		if v.ID == "original" {
			if pl, err := r.Pipeline(ctx, v.Pipeline); err == nil {
				dir = pl.WorkDir
			}
		}
	}
	cmd := exec.CommandContext(ctx, "git", append([]string{"diff"}, commits...)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, f.IO.Out, f.IO.ErrOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git diff in %s: %w", dir, err)
	}
	return nil
}

func selectRun(ctx context.Context, f *cmdutil.Factory, opts *Options, ref, id string) error {
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	g, err := group(ctx, r, ref)
	if err != nil {
		return err
	}
	if why := g.CannotSelect(id); why != "" {
		return fmt.Errorf("selection refused: %s", why)
	}
	env, err := schemas.New(schemas.TypeVariantSelect, g.Session, "user", agentpipeline.Name, f.Now(), schemas.VariantSelect{GroupID: g.ID, VariantID: id})
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return err
	}
	if opts.JSON {
		return f.IO.PrintJSON(map[string]any{"seq": seq, "id": env.ID, "group": g.ID, "variant": id})
	}
	fmt.Fprintf(f.IO.Out, "variant %s of group %s selected (seq %d): the pipeline agent merges it into the work directory and removes the worktrees\n", id, g.ID, seq)
	return nil
}
