package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Variants (seed L26131-26733). A variant request for a node whose pipeline
// runs opens the node's variant group (the running pipeline is its
// "original", still in the work directory) and starts another pipeline with
// the requested approach in a git worktree of its own, at the original's
// starting commit. The node's outcome waits until the user selects a ready
// variant once every variant has ended: the selected one's changes replace
// the original's in the work directory (git diff from the original's end to
// the variant's end, over the files either changed, applied with git apply),
// and the worktrees are removed. When every variant fails, the node fails.

// Refusals of a variant request.
var (
	ErrNoPipeline    = errors.New("the node runs no pipeline")
	ErrStepFinished  = errors.New("the step has finished")
	ErrNotStarted    = errors.New("the step has not started")
	ErrNotRepository = errors.New("the work directory is not a git repository")
)

// Reads are the projections Original reads: *projections.Store, or any
// projections.Reader.
type Reads interface {
	DAG(ctx context.Context, id string) (*projections.DAG, error)
	Pipelines(ctx context.Context, f projections.PipelineFilter) ([]*projections.Pipeline, error)
}

// Original finds the running pipeline of a node that variants branch from.
// The errors say why there is none.
func Original(ctx context.Context, st Reads, dagID, nodeID string) (*projections.Pipeline, error) {
	dag, err := st.DAG(ctx, dagID)
	if err != nil {
		return nil, err
	}
	var node *projections.Node
	for _, n := range dag.Nodes {
		if n.ID == nodeID {
			node = n
		}
	}
	if node == nil {
		return nil, fmt.Errorf("dag %s has no node %q: %w", dagID, nodeID, projections.ErrNotFound)
	}
	if node.State.Done() {
		return nil, fmt.Errorf("node %s is %s: %w; variants are for a step that has not finished", nodeID, node.State, ErrStepFinished)
	}
	if node.Tool != "" {
		return nil, fmt.Errorf("node %s is a tool node: %w", nodeID, ErrNoPipeline)
	}
	pls, err := st.Pipelines(ctx, projections.PipelineFilter{DAG: dagID, Node: nodeID})
	if err != nil {
		return nil, err
	}
	for i := len(pls) - 1; i >= 0; i-- {
		pl := pls[i]
		if pl.Attempt == node.Attempt && (pl.Variant == "" || pl.Variant == "original") {
			if pl.StartingCommit == "" {
				return nil, fmt.Errorf("node %s: %w (variants run in git worktrees)", nodeID, ErrNotRepository)
			}
			return pl, nil
		}
	}
	return nil, fmt.Errorf("node %s is %s: %w; ask for a variant once its pipeline runs (sylk pipeline ls)", nodeID, node.State, ErrNotStarted)
}

// variant handles a variant_request.
func (a *Agent) variant(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.VariantRequest](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	if strings.TrimSpace(p.Approach) == "" {
		return notice(d, "variant-refused", schemas.NoticeError, "a variant needs an approach", `sylk variant request NODE "the other approach"`)
	}
	if done, err := a.requested(ctx, p, d.Env.ID); err != nil || done {
		return nil, err // a replay of a request already carried out
	}
	orig, err := Original(ctx, a.Store, p.DAGID, p.NodeID)
	if err != nil {
		if errors.Is(err, projections.ErrNotFound) || errors.Is(err, ErrStepFinished) || errors.Is(err, ErrNotStarted) ||
			errors.Is(err, ErrNotRepository) || errors.Is(err, ErrNoPipeline) {
			return notice(d, "variant-refused", schemas.NoticeError, "variant refused: "+err.Error(), "")
		}
		return nil, agents.Transient(err, 0)
	}
	groupID := "g-" + tools.CallID(p.DAGID, p.NodeID)[:12]
	var outs []*schemas.Envelope
	taken := 1 // the original
	g, err := a.Store.VariantGroup(ctx, groupID)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		e, err := d.Derive(schemas.TypeVariantGroupCreated, "user", "group", schemas.VariantGroupCreated{
			GroupID: groupID, DAGID: p.DAGID, NodeID: p.NodeID, StartingCommit: orig.StartingCommit, Original: orig.ID})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		outs = append(outs, e)
	case err != nil:
		return nil, agents.Transient(err, 0)
	case g.State == projections.GroupSelected || g.State == projections.GroupCancelled:
		return notice(d, "variant-refused", schemas.NoticeError, fmt.Sprintf("variant refused: group %s of node %s is %s", g.ID, p.NodeID, g.State), "")
	default:
		taken = len(g.Variants)
	}
	variantID := fmt.Sprintf("v%d", taken)
	worktree := a.worktreePath(d.Env.SessionID, orig, groupID, variantID)
	where := agents.ToolWhere{DAGID: orig.DAG, NodeID: orig.Node, Attempt: orig.Attempt}
	script := fmt.Sprintf("set -e\n[ -e %[1]s/.git ] || git worktree add --detach %[1]s %[2]s >&2\n", shellQuote(worktree), shellQuote(orig.StartingCommit))
	if _, err := a.git(ctx, d, orig.WorkDir, groupID+"/"+variantID+"/worktree", script, where); err != nil {
		if isGitFailure(err) {
			return notice(d, "variant-refused", schemas.NoticeError, "variant refused: its worktree could not be made: "+err.Error(), "")
		}
		return nil, err
	}
	id := pipelineID(groupID, variantID)
	vc, err := d.Derive(schemas.TypeVariantCreated, "user", "variant", schemas.VariantCreated{
		GroupID: groupID, VariantID: variantID, Approach: p.Approach, PipelineID: id, Worktree: worktree})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	outs = append(outs, vc)
	started, err := a.begin(d, schemas.PipelineStarted{PipelineID: id, DAGID: orig.DAG, NodeID: orig.Node, Attempt: orig.Attempt,
		Mode: orig.Mode, Agent: orig.Agent, Prompt: orig.Prompt, WorkDir: worktree, StartingCommit: orig.StartingCommit,
		MaxLoops: orig.MaxLoops, GroupID: groupID, VariantID: variantID, Approach: p.Approach, MaxHandoffs: a.maxHandoffs()}, "variant", nil)
	if err != nil {
		return nil, err
	}
	return append(outs, started...), nil
}

// requested reports whether the variant request with id made a variant.
func (a *Agent) requested(ctx context.Context, p *schemas.VariantRequest, id string) (bool, error) {
	gs, err := a.Store.VariantGroups(ctx, projections.PipelineFilter{DAG: p.DAGID, Node: p.NodeID})
	if err != nil {
		return false, agents.Transient(err, 0)
	}
	for _, g := range gs {
		for _, v := range g.Variants {
			if v.Request == id {
				return true, nil
			}
		}
	}
	return false, nil
}

// variantEnded follows a variant's end: when it was the last one running,
// the user is told the variants are ready, or the node fails when none is.
func (a *Agent) variantEnded(ctx context.Context, d *agents.Delivery, pl *projections.Pipeline, ready bool) ([]*schemas.Envelope, error) {
	g, err := a.Store.VariantGroup(ctx, pl.Group)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	anyReady := ready
	for _, v := range g.Variants {
		if v.Pipeline == pl.ID {
			continue
		}
		if v.State == projections.VariantRunning {
			return nil, nil
		}
		anyReady = anyReady || v.State == projections.VariantReady
	}
	if anyReady {
		e, err := deriveFor(d, g.ID, schemas.TypeNotice, "user", "variants-ready", schemas.Notice{Level: schemas.NoticeInfo,
			Text: fmt.Sprintf("the variants of node %s have ended (group %s)", g.Node, g.ID),
			Hint: fmt.Sprintf("compare them: sylk variant show %s; sylk variant diff %s VARIANT; then sylk variant select %s VARIANT", g.ID, g.ID, g.ID)})
		if err != nil {
			return nil, agents.Permanent(err)
		}
		return []*schemas.Envelope{e}, nil
	}
	tf, err := deriveFor(d, g.ID, schemas.TypeTaskFailed, "orchestrator", "group-failed", schemas.TaskFailed{DAGID: g.DAG, NodeID: g.Node,
		Attempt: pl.Attempt, Error: fmt.Sprintf("every variant of group %s failed", g.ID)})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{tf}, a.removeWorktrees(ctx, d, g, pl)
}

// worktreePath is where a variant's worktree goes: under WorktreeDir, in a
// directory of the repository (the original's work directory) and the
// session, then of the group and the variant. A group's id comes from its
// DAG's and node's ids alone, which another repository's session (another
// Sylk sharing the temporary directory) may have too: without the first
// part, its variants took these worktrees.
func (a *Agent) worktreePath(session string, orig *projections.Pipeline, groupID, variantID string) string {
	return filepath.Join(a.WorktreeDir, "r-"+tools.CallID(orig.WorkDir, session)[:12], groupID, variantID)
}

// removeWorktrees removes a group's worktrees (recorded, once).
func (a *Agent) removeWorktrees(ctx context.Context, d *agents.Delivery, g *projections.VariantGroup, orig *projections.Pipeline) error {
	var paths []string
	for _, v := range g.Variants {
		if v.Worktree != "" {
			paths = append(paths, v.Worktree)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&b, "git worktree remove --force %s 2>/dev/null || rm -rf %s\n", shellQuote(p), shellQuote(p))
	}
	b.WriteString("git worktree prune\n")
	where := agents.ToolWhere{DAGID: g.DAG, NodeID: g.Node, Attempt: orig.Attempt}
	_, err := a.git(ctx, d, a.groupDir(ctx, g), g.ID+"/remove", b.String(), where)
	return err
}

// groupDir is the work directory of a group's original.
func (a *Agent) groupDir(ctx context.Context, g *projections.VariantGroup) string {
	for _, v := range g.Variants {
		if v.ID == "original" {
			if pl, err := a.Store.Pipeline(ctx, v.Pipeline); err == nil {
				return pl.WorkDir
			}
		}
	}
	return ""
}

// selectVariant merges the chosen variant into the work directory, removes
// the worktrees and completes the node.
func (a *Agent) selectVariant(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.VariantSelect](d.Env)
	if err != nil {
		return nil, agents.Permanent(err)
	}
	g, err := a.Store.VariantGroup(ctx, p.GroupID)
	if errors.Is(err, projections.ErrNotFound) {
		return notice(d, "select-refused", schemas.NoticeError, fmt.Sprintf("no variant group %q", p.GroupID), "sylk variant ls")
	}
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	if g.State == projections.GroupSelected && g.Selected == p.VariantID {
		return nil, nil // a redelivery after the selection was recorded
	}
	if why := g.CannotSelect(p.VariantID); why != "" {
		return notice(d, "select-refused", schemas.NoticeError, "selection refused: "+why, "sylk variant show "+g.ID)
	}
	chosen := g.Variant(p.VariantID)
	var orig *projections.Variant
	for i := range g.Variants {
		if g.Variants[i].ID == "original" {
			orig = &g.Variants[i]
		}
	}
	origPl, err := a.Store.Pipeline(ctx, orig.Pipeline)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	where := agents.ToolWhere{DAGID: g.DAG, NodeID: g.Node, Attempt: origPl.Attempt}
	if chosen.ID != "original" {
		// The work directory holds the original's result (or, if it failed,
		// what it left): turn the files either one changed into the
		// variant's.
		chosenPl, err := a.Store.Pipeline(ctx, chosen.Pipeline)
		if err != nil {
			return nil, agents.Transient(err, 0)
		}
		from := orig.EndCommit
		if from == "" {
			if from, err = a.git(ctx, d, origPl.WorkDir, g.ID+"/select/now", snapshotScript, where); err != nil {
				return nil, err
			}
		}
		files := slices.Clone(origPl.FilesChanged)
		for _, f := range chosenPl.FilesChanged {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			script := fmt.Sprintf("set -e\ngit diff --binary %s %s -- %s > \"${TMPDIR:-/tmp}/sylk-$$.patch\"\ngit apply --whitespace=nowarn \"${TMPDIR:-/tmp}/sylk-$$.patch\"\nrm -f \"${TMPDIR:-/tmp}/sylk-$$.patch\"\n",
				shellQuote(from), shellQuote(chosen.EndCommit), quoteAll(files))
			if _, err := a.git(ctx, d, origPl.WorkDir, g.ID+"/select/apply", script, where); err != nil {
				if isGitFailure(err) {
					return notice(d, "select-failed", schemas.NoticeError,
						fmt.Sprintf("variant %s could not be merged into the work directory: %v", chosen.ID, err),
						"the work directory changed where the variant did; resolve by hand with sylk variant diff "+g.ID+" "+chosen.ID)
				}
				return nil, err
			}
		}
	}
	if err := a.removeWorktrees(ctx, d, g, origPl); err != nil {
		return nil, err
	}
	var removed []string
	for _, v := range g.Variants {
		if v.Worktree != "" {
			removed = append(removed, v.Worktree)
		}
	}
	sel, err := d.Derive(schemas.TypeVariantSelected, "user", "selected", schemas.VariantSelected{GroupID: g.ID, VariantID: chosen.ID, Removed: removed})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	chosenPl, err := a.Store.Pipeline(ctx, chosen.Pipeline)
	if err != nil {
		return nil, agents.Transient(err, 0)
	}
	tc, err := d.Derive(schemas.TypeTaskComplete, "orchestrator", "outcome", schemas.TaskComplete{DAGID: g.DAG, NodeID: g.Node, Attempt: origPl.Attempt,
		Summary:  fmt.Sprintf("variant %s selected (%s): %s", chosen.ID, chosen.Approach, chosenPl.Summary),
		Evidence: evidenceOf(chosenPl)})
	if err != nil {
		return nil, agents.Permanent(err)
	}
	return []*schemas.Envelope{sel, tc}, nil
}
