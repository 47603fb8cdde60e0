package projections

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sylk/sylk/schemas"
)

// Keys of the pipelines projection.
const (
	pipelinePrefix = "pipelines/p/"
	groupPrefix    = "pipelines/g/"
)

func pipelineKey(id string) []byte      { return key(pipelinePrefix, id) }
func groupKey(id string) []byte         { return key(groupPrefix, id) }
func nodeGroupKey(dag, n string) []byte { return key("pipelines/n/", dag, n) }

// applyPipelines folds single-worker pipelines and variant groups. A pipeline
// starts once, moves stage by stage (a stage is dispatched once per loop and
// reported once), waits for the user when its loops are used, and ends
// completed or failed (or handed off to a successor); /task messages reach
// the pipeline carrying the work on, if it has not ended. A variant group
// opens once per node, on a pipeline that has not ended; each variant's end
// moves the group (active -> pending or cancelled), and only a ready variant
// of a pending group is selected. Anything else is refused with the reason.
func applyPipelines(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypePipelineStarted:
		p, err := payloadOf[schemas.PipelineStarted](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return pipelineStarted(t, ev, p)
	case schemas.TypePipelineStage:
		p, err := payloadOf[schemas.PipelineStage](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onPipeline(t, ev, p.PipelineID, "a stage", func(pl *Pipeline) string {
			if pl.Result(p.Stage, p.Loop) != nil {
				return fmt.Sprintf("stage %s of loop %d was dispatched already", p.Stage, p.Loop)
			}
			pl.Stage, pl.Loop = p.Stage, p.Loop
			pl.Waiting = append(pl.Waiting, p.Stage)
			pl.Stages = append(pl.Stages, PipelineStageRecord{Stage: p.Stage, Loop: p.Loop, Agent: p.Agent, Seq: ev.seq})
			if p.Stage == schemas.StageImplement && p.UserMessages > pl.Delivered {
				pl.Delivered = min(p.UserMessages, len(pl.UserMessages))
			}
			return ""
		})
	case schemas.TypePipelineStageResult:
		p, err := payloadOf[schemas.PipelineStageResult](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onPipeline(t, ev, p.PipelineID, "a stage result", func(pl *Pipeline) string {
			r := pl.Result(p.Stage, p.Loop)
			switch {
			case r == nil:
				return fmt.Sprintf("stage %s of loop %d was never dispatched", p.Stage, p.Loop)
			case r.ResultSeq != 0:
				return fmt.Sprintf("stage %s of loop %d was reported already (seq %d)", p.Stage, p.Loop, r.ResultSeq)
			}
			r.ResultSeq, r.Passed, r.Summary, r.Tests, r.Issues, r.Evidence = ev.seq, p.Passed, p.Summary, p.Tests, p.Issues, p.Evidence
			if i := slices.Index(pl.Waiting, p.Stage); i >= 0 {
				pl.Waiting = slices.Delete(pl.Waiting, i, i+1)
			}
			switch p.Stage {
			case schemas.StageCriteria:
				pl.Criteria = p.Summary
			case schemas.StageRed:
				pl.Tests = p.Summary
			}
			for _, f := range p.FilesChanged {
				if !slices.Contains(pl.FilesChanged, f) {
					pl.FilesChanged = append(pl.FilesChanged, f)
				}
			}
			return ""
		})
	case schemas.TypeInspectorFeedback:
		p, err := payloadOf[schemas.InspectorFeedback](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onPipeline(t, ev, p.PipelineID, "feedback", func(pl *Pipeline) string {
			pl.Feedback = append(pl.Feedback, PipelineFeedback{Loop: p.Loop, From: "inspector", Summary: p.Summary, Issues: p.Issues, Evidence: p.Evidence, Seq: ev.seq})
			return ""
		})
	case schemas.TypeTesterFeedback:
		p, err := payloadOf[schemas.TesterFeedback](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onPipeline(t, ev, p.PipelineID, "feedback", func(pl *Pipeline) string {
			pl.Feedback = append(pl.Feedback, PipelineFeedback{Loop: p.Loop, From: "tester", Summary: p.Summary, Issues: p.Failures, Evidence: p.Evidence, Seq: ev.seq})
			return ""
		})
	case schemas.TypePipelineAwaitingUser:
		p, err := payloadOf[schemas.PipelineAwaitingUser](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onPipeline(t, ev, p.PipelineID, "a question to the user", func(pl *Pipeline) string {
			if pl.State != PipelineRunning {
				return fmt.Sprintf("pipeline %s is %s: only a running pipeline asks the user", pl.ID, pl.State)
			}
			pl.State, pl.Findings, pl.Reason = PipelineAwaitingUser, p.Findings, p.Reason
			return ""
		})
	case schemas.TypePipelineComplete:
		p, err := payloadOf[schemas.PipelineComplete](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return endPipeline(t, ev, p.PipelineID, func(pl *Pipeline, v *Variant) {
			pl.State, pl.Summary, pl.Ignored, pl.EndCommit = PipelineCompleted, p.Summary, p.Ignored, p.EndCommit
			if len(p.FilesChanged) > 0 {
				pl.FilesChanged = p.FilesChanged
			}
			if v != nil {
				v.State, v.EndCommit = VariantReady, p.EndCommit
			}
		})
	case schemas.TypePipelineFailed:
		p, err := payloadOf[schemas.PipelineFailed](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return endPipeline(t, ev, p.PipelineID, func(pl *Pipeline, v *Variant) {
			pl.State, pl.Reason = PipelineFailed, p.Reason
			if v != nil {
				v.State, v.Error = VariantFailed, p.Reason
			}
		})
	case schemas.TypePipelineHandoff:
		p, err := payloadOf[schemas.PipelineHandoff](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return pipelineHandoff(t, ev, p)
	case schemas.TypeUserTaskPrompt, schemas.TypeUserTaskQuery, schemas.TypeUserTaskInterrupt,
		schemas.TypeUserIgnoreInspector, schemas.TypeUserIgnoreTester, schemas.TypeUserStopHandoffs:
		v, err := ev.decode()
		if err != nil {
			return t.reject(Pipelines, ev, "payload does not decode: %v", err)
		}
		p := schemas.TaskMessageOf(v)
		id, err := carrier(t, p.PipelineID)
		if err != nil {
			return err
		}
		return onPipeline(t, ev, id, "a /task message", func(pl *Pipeline) string {
			switch env.Type {
			case schemas.TypeUserIgnoreInspector:
				pl.IgnoreInspector = true
			case schemas.TypeUserIgnoreTester:
				pl.IgnoreTester = true
			case schemas.TypeUserStopHandoffs:
				pl.HandoffsStopped = cmp.Or(p.Text, "by /task "+p.PipelineID+" stop_handoffs")
			}
			pl.UserMessages = append(pl.UserMessages, PipelineUserMessage{Seq: ev.seq, Type: env.Type, Text: p.Text})
			return ""
		})
	case schemas.TypeVariantGroupCreated:
		p, err := payloadOf[schemas.VariantGroupCreated](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return groupCreated(t, ev, p)
	case schemas.TypeVariantCreated:
		p, err := payloadOf[schemas.VariantCreated](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onGroup(t, ev, p.GroupID, func(g *VariantGroup) string {
			switch {
			case g.State != GroupActive && g.State != GroupPending:
				return fmt.Sprintf("group %s is %s: it takes no more variants", g.ID, g.State)
			case g.Variant(p.VariantID) != nil:
				return fmt.Sprintf("group %s has a variant %s already", g.ID, p.VariantID)
			}
			g.State = GroupActive
			g.Variants = append(g.Variants, Variant{ID: p.VariantID, Approach: p.Approach, Pipeline: p.PipelineID, Worktree: p.Worktree, State: VariantRunning, Request: ev.env.ParentID})
			return ""
		})
	case schemas.TypeVariantSelect:
		p, err := payloadOf[schemas.VariantSelect](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onGroup(t, ev, p.GroupID, func(g *VariantGroup) string { return g.CannotSelect(p.VariantID) })
	case schemas.TypeVariantSelected:
		p, err := payloadOf[schemas.VariantSelected](t, Pipelines, ev)
		if p == nil {
			return err
		}
		return onGroup(t, ev, p.GroupID, func(g *VariantGroup) string {
			if why := g.CannotSelect(p.VariantID); why != "" {
				return why
			}
			for i := range g.Variants {
				v := &g.Variants[i]
				switch {
				case v.ID == p.VariantID:
					v.State = VariantSelected
				case v.State == VariantReady:
					v.State = VariantDiscarded
				}
			}
			g.State, g.Selected, g.FinishedAt = GroupSelected, p.VariantID, timePtr(env.Timestamp)
			return ""
		})
	}
	return nil
}

func pipelineStarted(t *tx, ev *event, p *schemas.PipelineStarted) error {
	k := pipelineKey(p.PipelineID)
	old, err := load[Pipeline](t, k)
	switch {
	case err != nil:
		return err
	case old != nil:
		return t.reject(Pipelines, ev, "pipeline %s started already (seq %d)", p.PipelineID, old.Seq)
	case !slices.Contains(schemas.PipelineModes(), p.Mode):
		return t.reject(Pipelines, ev, "unknown pipeline mode %q", p.Mode)
	}
	pl := &Pipeline{ID: p.PipelineID, Session: ev.env.SessionID, DAG: p.DAGID, Node: p.NodeID, Attempt: p.Attempt, Mode: p.Mode,
		Agent: p.Agent, Prompt: p.Prompt, WorkDir: p.WorkDir, StartingCommit: p.StartingCommit, MaxLoops: p.MaxLoops,
		State: PipelineRunning, Group: p.GroupID, Variant: p.VariantID, Approach: p.Approach, MaxHandoffs: p.MaxHandoffs,
		Seq: ev.seq, CreatedAt: ev.env.Timestamp}
	if h := p.Handoff; h != nil {
		prev, err := load[Pipeline](t, pipelineKey(h.OldPipelineID))
		if err != nil {
			return err
		}
		if prev == nil || prev.HandoffTo != p.PipelineID {
			return t.reject(Pipelines, ev, "pipeline %s was not handed to %s", h.OldPipelineID, p.PipelineID)
		}
		pl.HandoffFrom, pl.Handoff = h.OldPipelineID, h
		pl.Carry(prev)
		if h.Inspector != nil {
			pl.Criteria = h.Inspector.Criteria
		}
		if h.Tester != nil {
			pl.Tests = h.Tester.TestsCreated
		}
	}
	if p.GroupID != "" {
		g, err := load[VariantGroup](t, groupKey(p.GroupID))
		if err != nil {
			return err
		}
		if g == nil || g.Variant(p.VariantID) == nil || g.Variant(p.VariantID).Pipeline != p.PipelineID {
			return t.reject(Pipelines, ev, "group %s has no variant %s for pipeline %s", p.GroupID, p.VariantID, p.PipelineID)
		}
	}
	store(t, k, pl)
	return nil
}

// pipelineHandoff closes a running pipeline, handed to p.NewPipelineID; a
// variant's successor takes its place in the group.
func pipelineHandoff(t *tx, ev *event, p *schemas.PipelineHandoff) error {
	return onPipeline(t, ev, p.OldPipelineID, "a handoff", func(pl *Pipeline) string {
		if pl.State != PipelineRunning {
			return fmt.Sprintf("pipeline %s is %s: only a running pipeline is handed off", pl.ID, pl.State)
		}
		pl.State, pl.HandoffTo, pl.Reason, pl.Waiting = PipelineHandedOff, p.NewPipelineID, p.Reason, nil
		pl.FinishedAt, pl.EndSeq = timePtr(ev.env.Timestamp), ev.seq
		if pl.Group == "" {
			return ""
		}
		g, err := load[VariantGroup](t, groupKey(pl.Group))
		if err != nil || g == nil || g.Variant(pl.Variant) == nil {
			return fmt.Sprintf("variant %s of group %s is unknown", pl.Variant, pl.Group)
		}
		g.Variant(pl.Variant).Pipeline = p.NewPipelineID
		store(t, groupKey(g.ID), g)
		return ""
	})
}

func groupCreated(t *tx, ev *event, p *schemas.VariantGroupCreated) error {
	nk := nodeGroupKey(p.DAGID, p.NodeID)
	have, err := load[string](t, nk)
	if err != nil {
		return err
	}
	if have != nil {
		return t.reject(Pipelines, ev, "node %s of dag %s has a variant group already (%s)", p.NodeID, p.DAGID, *have)
	}
	gk := groupKey(p.GroupID)
	if old, err := load[VariantGroup](t, gk); err != nil || old != nil {
		if err != nil {
			return err
		}
		return t.reject(Pipelines, ev, "variant group %s exists already", p.GroupID)
	}
	orig, err := load[Pipeline](t, pipelineKey(p.Original))
	switch {
	case err != nil:
		return err
	case orig == nil:
		return t.reject(Pipelines, ev, "pipeline %s is unknown", p.Original)
	case orig.State.Done():
		return t.reject(Pipelines, ev, "pipeline %s is %s: variants are for a step that has not finished", orig.ID, orig.State)
	}
	orig.Group, orig.Variant = p.GroupID, "original"
	store(t, pipelineKey(orig.ID), orig)
	g := &VariantGroup{ID: p.GroupID, Session: ev.env.SessionID, DAG: p.DAGID, Node: p.NodeID, StartingCommit: p.StartingCommit,
		State: GroupActive, Seq: ev.seq, CreatedAt: ev.env.Timestamp,
		Variants: []Variant{{ID: "original", Approach: "as planned", Pipeline: orig.ID, State: VariantRunning}}}
	store(t, gk, g)
	id := p.GroupID
	store(t, nk, &id)
	return nil
}

// carrier is the pipeline that carries on the work of pipeline id: id
// itself, or the end of its chain of handoffs (a successor not started yet
// is returned, and refused as unknown).
func carrier(t *tx, id string) (string, error) {
	for {
		pl, err := load[Pipeline](t, pipelineKey(id))
		if err != nil || pl == nil || pl.State != PipelineHandedOff {
			return id, err
		}
		id = pl.HandoffTo
	}
}

// onPipeline applies f to a pipeline that has not ended; f returns why the
// event is refused, or "".
func onPipeline(t *tx, ev *event, id, what string, f func(*Pipeline) string) error {
	k := pipelineKey(id)
	pl, err := load[Pipeline](t, k)
	switch {
	case err != nil:
		return err
	case pl == nil:
		return t.reject(Pipelines, ev, "pipeline %s is unknown", id)
	case pl.State.Done():
		return t.reject(Pipelines, ev, "pipeline %s is %s: %s comes too late", id, pl.State, what)
	}
	if why := f(pl); why != "" {
		return t.reject(Pipelines, ev, "%s", why)
	}
	store(t, k, pl)
	return nil
}

// endPipeline ends a pipeline, and moves its variant and group.
func endPipeline(t *tx, ev *event, id string, f func(*Pipeline, *Variant)) error {
	var g *VariantGroup
	err := onPipeline(t, ev, id, "end", func(pl *Pipeline) string {
		pl.FinishedAt, pl.EndSeq = timePtr(ev.env.Timestamp), ev.seq
		if pl.Group == "" {
			f(pl, nil)
			return ""
		}
		var err error
		if g, err = load[VariantGroup](t, groupKey(pl.Group)); err != nil || g == nil {
			f(pl, nil)
			return ""
		}
		v := g.Variant(pl.Variant)
		f(pl, v)
		if g.State == GroupActive && !slices.ContainsFunc(g.Variants, func(v Variant) bool { return v.State == VariantRunning }) {
			g.State = GroupCancelled
			if slices.ContainsFunc(g.Variants, func(v Variant) bool { return v.State == VariantReady }) {
				g.State = GroupPending
			} else {
				g.FinishedAt = timePtr(ev.env.Timestamp)
			}
		}
		store(t, groupKey(g.ID), g)
		return ""
	})
	return err
}

func onGroup(t *tx, ev *event, id string, f func(*VariantGroup) string) error {
	k := groupKey(id)
	g, err := load[VariantGroup](t, k)
	switch {
	case err != nil:
		return err
	case g == nil:
		return t.reject(Pipelines, ev, "variant group %s is unknown", id)
	}
	if why := f(g); why != "" {
		return t.reject(Pipelines, ev, "%s", why)
	}
	store(t, k, g)
	return nil
}
