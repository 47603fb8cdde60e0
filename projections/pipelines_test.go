package projections_test

import (
	"fmt"
	"strings"

	"github.com/sylk/sylk/projections"
)

// runPipelines answers the golden tests' pipeline and variant commands.
func (w *world) runPipelines(cmd string, args map[string]string) string {
	switch cmd {
	case "pipeline":
		p, err := w.store.Pipeline(w.ctx, args["id"])
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return formatPipeline(p)
	case "pipelines":
		ps, err := w.store.Pipelines(w.ctx, projections.PipelineFilter{Session: args["session"], Node: args["node"], State: projections.PipelineState(args["state"])})
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&b, "%s %s/%s %s %s loop %d\n", p.ID, p.DAG, p.Node, p.Mode, p.State, p.Loop)
		}
		return b.String()
	}
	g, err := w.store.VariantGroup(w.ctx, args["id"])
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s %s from %s selected=%q\n", g.ID, g.DAG, g.Node, g.State, g.StartingCommit, g.Selected)
	for _, v := range g.Variants {
		fmt.Fprintf(&b, "  %s %s pipeline=%s worktree=%q end=%q approach=%q", v.ID, v.State, v.Pipeline, v.Worktree, v.EndCommit, v.Approach)
		if v.Error != "" {
			fmt.Fprintf(&b, " error=%q", v.Error)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func formatPipeline(p *projections.Pipeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s attempt %d %s by %s: %s at %s loop %d of %d from %q", p.ID, p.DAG, p.Node, p.Attempt, p.Mode, p.Agent,
		p.State, p.Stage, p.Loop, p.MaxLoops, p.StartingCommit)
	if len(p.Waiting) > 0 {
		fmt.Fprintf(&b, " waiting=%v", p.Waiting)
	}
	if p.Group != "" {
		fmt.Fprintf(&b, " group=%s/%s", p.Group, p.Variant)
	}
	b.WriteString("\n")
	if p.HandoffTo != "" {
		fmt.Fprintf(&b, "  handed off to %s\n", p.HandoffTo)
	}
	if h := p.Handoff; h != nil {
		fmt.Fprintf(&b, "  handoff %d from %s at loop %d: %s\n", h.HandoffIndex, p.HandoffFrom, h.Loop, h.Reason)
	}
	if p.MaxHandoffs > 0 || p.HandoffsStopped != "" {
		fmt.Fprintf(&b, "  handoffs: max %d stopped %q refusal %q\n", p.MaxHandoffs, p.HandoffsStopped, p.HandoffRefusal())
	}
	for _, s := range p.Stages {
		fmt.Fprintf(&b, "  stage %s loop %d by %s at %d", s.Stage, s.Loop, s.Agent, s.Seq)
		if s.ResultSeq != 0 {
			fmt.Fprintf(&b, ": passed=%v %q at %d", s.Passed, s.Summary, s.ResultSeq)
		}
		if s.Tests != nil {
			fmt.Fprintf(&b, " tests=%d/%d/%d", s.Tests.Passed, s.Tests.Failed, s.Tests.Skipped)
		}
		b.WriteString("\n")
	}
	for _, f := range p.Feedback {
		fmt.Fprintf(&b, "  feedback loop %d from %s: %q issues=%v\n", f.Loop, f.From, f.Summary, f.Issues)
	}
	for _, m := range p.UserMessages {
		fmt.Fprintf(&b, "  user %s at %d: %q\n", m.Type, m.Seq, m.Text)
	}
	for _, x := range []struct{ k, v string }{{"criteria", p.Criteria}, {"tests", p.Tests}, {"summary", p.Summary}, {"reason", p.Reason}, {"end", p.EndCommit}} {
		if x.v != "" {
			fmt.Fprintf(&b, "  %s: %q\n", x.k, x.v)
		}
	}
	if len(p.FilesChanged) > 0 || len(p.Findings) > 0 || p.Delivered > 0 || p.IgnoreInspector || p.IgnoreTester || p.Ignored {
		fmt.Fprintf(&b, "  files=%v findings=%v delivered=%d ignore_inspector=%v ignore_tester=%v ignored=%v\n",
			p.FilesChanged, p.Findings, p.Delivered, p.IgnoreInspector, p.IgnoreTester, p.Ignored)
	}
	return b.String()
}
