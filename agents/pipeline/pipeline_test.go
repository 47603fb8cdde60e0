package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/pipeline"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// fixture is a stack running the Orchestrator, the pipeline agent and the
// three workers over a fake model that answers each stage from a table, and
// a real Go module in a git repository.
type fixture struct {
	*llmtest.Stack
	// The model's replies, by stage.
	*scripted.Stages
	t   *testing.T
	srv *llmtest.Server
	dir string
	// worktrees is where variants' worktrees go.
	worktrees string
	// maxHandoffs caps chains of handoffs (0: the default).
	maxHandoffs int

	handled atomic.Int64
	stops   []func()
	client  *llm.Client
}

var workers = []string{"engineer", "inspector", "tester"}

// option adjusts a fixture, or its LLM client's configuration, before its
// agents start.
type option func(*fixture, *llm.Config)

func newFixture(t *testing.T, opts ...option) *fixture {
	t.Helper()
	f := &fixture{Stack: llmtest.NewStack(t), Stages: scripted.NewStages(t), t: t, srv: llmtest.New(t), dir: t.TempDir(), worktrees: t.TempDir()}
	f.srv.Respond(f.Respond)
	cfg := llm.Config{BaseURL: f.srv.URL(), Model: "fake", NoStream: true, Timeout: 10 * time.Second, Backoff: time.Millisecond}
	for _, o := range opts {
		o(f, &cfg)
	}
	c, err := llm.NewClient(cfg, llm.Deps{Records: f.Store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.client = c
	f.module()
	f.start()
	return f
}

// module makes a Go module with an empty package calc, committed.
func (f *fixture) module() {
	f.write("go.mod", "module example.com/calc\n\ngo 1.22\n")
	f.write("calc.go", scripted.CalcGo)
	f.git("init", "-q")
	f.git("add", "-A")
	f.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) read(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	return string(b)
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// start runs the agents (again, after stop).
func (f *fixture) start() {
	ex := &worker.Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}}
	pl := &worker.PromptLoop{LLM: f.client, Executors: ex, Records: f.Store, Pipelines: f.Store}
	cat := plan.Catalog{ToolAgents: workers, PromptAgents: workers, Tools: []string{"exec"}}
	hs := map[string]agents.Handler{
		orchestrator.Name: &orchestrator.Orchestrator{Store: f.Store, Log: f.Log, Catalog: cat},
		pipeline.Name:     &pipeline.Agent{Store: f.Store, Executors: ex, WorktreeDir: f.worktrees, MaxHandoffs: f.maxHandoffs},
	}
	for _, name := range workers {
		hs[name] = &worker.Worker{Agent: name, Executors: ex, Records: f.Store, Judge: worker.ByExit, Prompter: pl}
	}
	for name, h := range hs {
		counted := agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
			f.handled.Add(1)
			return h.Handle(ctx, d)
		})
		f.stops = append(f.stops, f.Run(name, counted, func(o *agents.Options) {
			if name == orchestrator.Name || name == pipeline.Name {
				o.PerSession = 1
			}
		}))
	}
}

// stop stops every agent (start runs them again).
func (f *fixture) stop() {
	for _, stop := range f.stops {
		stop()
	}
	f.stops = nil
}

func (f *fixture) names() []string { return append(workers, orchestrator.Name, pipeline.Name) }

// replay stops every agent, forgets its consumer and runs them all again
// from the start of the stream; it checks that nothing new is called or
// appended.
func (f *fixture) replay() {
	f.t.Helper()
	f.idle()
	calls, before, first := f.srv.Calls(), f.Stack.Census(), f.handled.Load()
	f.stop()
	for _, name := range f.names() {
		f.Forget(name)
	}
	f.start()
	f.idle()
	if replayed := f.handled.Load() - first; replayed < first {
		f.t.Fatalf("the replay handled %d messages, the first run %d", replayed, first)
	}
	if n := f.srv.Calls() - calls; n != 0 {
		f.t.Fatalf("the replay made %d LLM calls", n)
	}
	if after := f.Stack.Census(); after != before {
		f.t.Fatalf("the replay appended events:\nbefore %s\nafter  %s", before, after)
	}
}

func (f *fixture) idle() {
	f.t.Helper()
	for _, name := range f.names() {
		f.Eventually(30*time.Second, name+" idle", func() bool { return f.Idle(name) })
	}
}

func (f *fixture) submit(mode, prompt string) {
	f.Send("S1", "user", orchestrator.Name, schemas.TypeDAGExecute, schemas.DAGExecute{WorkDir: f.dir, DAG: schemas.DAG{ID: "d1",
		Nodes: []schemas.Node{{ID: "add", Agent: "engineer", Prompt: prompt, Pipeline: mode}}}})
}

func (f *fixture) pipelineOf(node string) *projections.Pipeline {
	f.t.Helper()
	var pl *projections.Pipeline
	f.Eventually(30*time.Second, "the pipeline of "+node, func() bool {
		ps, err := f.Store.Pipelines(f.Ctx, projections.PipelineFilter{Node: node})
		if err != nil || len(ps) == 0 {
			return false
		}
		pl = ps[0]
		return true
	})
	return pl
}

func (f *fixture) pipeline(id string) *projections.Pipeline {
	f.t.Helper()
	pl, err := f.Store.Pipeline(f.Ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return pl
}

// worktreeGone checks a variant's worktree is removed, from the disk and
// from git's list.
func (f *fixture) worktreeGone(path string) {
	f.t.Helper()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		f.t.Fatalf("the variant's worktree %s is still there: %v", path, err)
	}
	if list := f.git("worktree", "list"); strings.Contains(list, path) {
		f.t.Fatalf("git still lists the worktree:\n%s", list)
	}
}

func (f *fixture) workflow() *schemas.WorkflowComplete {
	f.t.Helper()
	f.Eventually(90*time.Second, "the workflow ends", func() bool { return f.Count(schemas.TypeWorkflowComplete) == 1 })
	return llmtest.Payloads[schemas.WorkflowComplete](f.Stack, schemas.TypeWorkflowComplete)[0]
}

// A TDD pipeline on a real Go module: the Inspector's criteria, the Tester's
// test that fails to build before the implementation (RED, from the parsed
// run), an Engineer whose first Add is wrong, the Tester's failure sent
// back with its evidence, a second loop that passes. A /task message
// reaches the Engineer. Then a replay from the start of the stream calls
// nothing and appends nothing.
func TestTDDPipelinePassesInTheSecondLoop(t *testing.T) {
	f := newFixture(t)
	f.TDDInTwoLoops()

	f.submit(schemas.PipelineTDD, "add Add(a, b int) int to package calc")
	pl := f.pipelineOf("add")
	f.Send("S1", "user", pipeline.Name, schemas.TypeUserTaskPrompt, schemas.UserTaskPrompt{PipelineID: pl.ID, Text: "keep Add on one line"})

	wc := f.workflow()
	if wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	pl = f.pipeline(pl.ID)
	if pl.State != projections.PipelineCompleted || pl.Loop != 2 || pl.Mode != schemas.PipelineTDD || pl.StartingCommit == "" || pl.EndCommit == "" {
		t.Fatalf("pipeline %+v", pl)
	}
	red := pl.Result(schemas.StageRed, 1)
	if red == nil || red.Tests == nil || len(red.Tests.BuildFailed) == 0 {
		t.Fatalf("RED stage %+v: want a test run that did not build", red)
	}
	if first := pl.Result(schemas.StageTest, 1); first.Passed || first.Tests == nil || first.Tests.Failed != 1 {
		t.Fatalf("loop 1 test stage %+v", first)
	}
	if last := pl.Result(schemas.StageTest, 2); !last.Passed || last.Tests == nil || last.Tests.Passed != 1 {
		t.Fatalf("loop 2 test stage %+v", last)
	}
	if len(pl.Feedback) != 1 || pl.Feedback[0].From != "tester" || pl.Feedback[0].Loop != 1 {
		t.Fatalf("feedback %+v", pl.Feedback)
	}
	second := f.Asked(scripted.At("engineer", "implement", 2, ""))
	if len(second) != 1 || !strings.Contains(second[0], "Findings of loop 1") || !strings.Contains(second[0], "calc.TestAdd") {
		t.Fatalf("the Engineer's second loop was not given the Tester's evidence: %q", second)
	}
	var heard bool
	for _, loop := range []int{1, 2} {
		for _, m := range f.Asked(scripted.At("engineer", "implement", loop, "")) {
			heard = heard || strings.Contains(m, "keep Add on one line")
		}
	}
	if !heard {
		t.Fatal("the /task message never reached the Engineer")
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("calc.go = %q", got)
	}
	out, err := exec.Command("go", "test", "-C", f.dir, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the module: %v\n%s", err, out)
	}
	f.replay()
}

// A standard pipeline whose Inspector finds a problem three times asks the
// user; failing it fails the node and the workflow.
func TestStandardPipelineExhaustsThreeLoopsAndAsksTheUser(t *testing.T) {
	f := newFixture(t)
	f.FailingThreeLoops()
	f.submit(schemas.PipelineStandard, "add Add(a, b int) int to package calc")
	pl := f.pipelineOf("add")
	f.Eventually(60*time.Second, "the pipeline asks the user", func() bool {
		return f.pipeline(pl.ID).State == projections.PipelineAwaitingUser
	})
	pl = f.pipeline(pl.ID)
	if pl.Loop != 3 || len(pl.Feedback) != 3 || f.Count(schemas.TypeInspectorFeedback) != 3 || f.Count(schemas.TypeTesterFeedback) != 0 {
		t.Fatalf("pipeline after three loops: loop %d, feedback %+v", pl.Loop, pl.Feedback)
	}
	if len(f.Asked(scripted.At("tester", "test", 1, ""))) != 0 {
		t.Fatal("the Tester ran although the Inspector failed (standard mode runs it after a passing Inspector)")
	}
	pending, err := f.Store.Pending(f.Ctx, "S1")
	if err != nil || len(pending) != 1 || pending[0].Correlation != pl.ID || pending[0].Asker != pipeline.Name {
		t.Fatalf("the session's pending items: %+v %v", pending, err)
	}
	if f.Count(schemas.TypeWorkflowComplete) != 0 {
		t.Fatal("the workflow ended before the user decided")
	}
	f.Send("S1", "user", pipeline.Name, schemas.TypeClarificationResponse, schemas.ClarificationResponse{InReplyTo: pl.ID, Answer: "fail"})
	wc := f.workflow()
	if wc.Outcome != schemas.OutcomeFailed || wc.Failed != 1 {
		t.Fatalf("workflow %+v", wc)
	}
	if pl = f.pipeline(pl.ID); pl.State != projections.PipelineFailed || !strings.Contains(pl.Reason, "failed by the user") {
		t.Fatalf("pipeline %+v", pl)
	}
	if pending, _ := f.Store.Pending(f.Ctx, "S1"); len(pending) != 0 {
		t.Fatalf("still pending: %+v", pending)
	}
	f.replay()
}

// Two variants of one step: while the original pipeline runs (its Engineer
// waits on a gate file), a variant with another approach starts in its own
// worktree at the same starting commit. Both end ready; selecting the
// variant puts its calc.go in the work directory and removes its worktree.
// Selecting a variant that failed, or any before all ended, is refused.
func TestTwoVariantsOneSelectedAndMerged(t *testing.T) {
	f := newFixture(t)
	gate := filepath.Join(t.TempDir(), "go-on")
	f.TwoVariants(gate)

	f.submit(schemas.PipelineReview, "add Add(a, b int) int to package calc")
	orig := f.pipelineOf("add")
	// Bad input first: an unknown node, and a node that is not there, are
	// refused with a notice and no group.
	f.Send("S1", "user", pipeline.Name, schemas.TypeVariantRequest, schemas.VariantRequest{DAGID: "d1", NodeID: "nope", Approach: "x"})
	f.Send("S1", "user", pipeline.Name, schemas.TypeVariantRequest, schemas.VariantRequest{DAGID: "d1", NodeID: "add", Approach: scripted.Counting})
	f.Eventually(30*time.Second, "the variant runs", func() bool {
		gs, _ := f.Store.VariantGroups(f.Ctx, projections.PipelineFilter{Node: "add"})
		return len(gs) == 1 && len(gs[0].Variants) == 2
	})
	if n := f.Count(schemas.TypeNotice); n != 1 {
		t.Fatalf("%d notices, want the refusal of the unknown node", n)
	}
	g, _ := f.Store.VariantGroups(f.Ctx, projections.PipelineFilter{Node: "add"})
	group := g[0]
	v1 := group.Variant("v1")
	if group.StartingCommit != orig.StartingCommit || v1 == nil || v1.Worktree == "" {
		t.Fatalf("group %+v", group)
	}
	if _, err := os.Stat(filepath.Join(v1.Worktree, "calc.go")); err != nil {
		t.Fatalf("the variant's worktree: %v", err)
	}
	if why := group.CannotSelect("v1"); !strings.Contains(why, "once every variant has ended") {
		t.Fatalf("selecting while active: %q", why)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.Eventually(60*time.Second, "both variants ready", func() bool {
		g, err := f.Store.VariantGroup(f.Ctx, group.ID)
		return err == nil && g.State == projections.GroupPending
	})
	if f.Count(schemas.TypeWorkflowComplete) != 0 {
		t.Fatal("the node completed before a variant was selected")
	}
	if got := f.read(v1.Worktree, "calc.go"); got != scripted.CountingAdd {
		t.Fatalf("the variant's calc.go = %q", got)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.RightAdd {
		t.Fatalf("the original's calc.go = %q", got)
	}
	f.Send("S1", "user", pipeline.Name, schemas.TypeVariantSelect, schemas.VariantSelect{GroupID: group.ID, VariantID: "v1"})
	wc := f.workflow()
	if wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("workflow %+v", wc)
	}
	if got := f.read(f.dir, "calc.go"); got != scripted.CountingAdd {
		t.Fatalf("calc.go after selecting v1 = %q", got)
	}
	f.worktreeGone(v1.Worktree)
	g2, _ := f.Store.VariantGroup(f.Ctx, group.ID)
	if g2.State != projections.GroupSelected || g2.Variant("v1").State != projections.VariantSelected || g2.Variant("original").State != projections.VariantDiscarded {
		t.Fatalf("group after selection %+v", g2)
	}
	f.replay()
}

// Two repositories whose DAGs have the same id (each its own Sylk, sharing
// the directory of variants' worktrees) get a worktree each: a variant of
// one does not take the other's.
func TestVariantWorktreesAreApartAcrossRepositories(t *testing.T) {
	shared := t.TempDir()
	var v1s []string
	var fs []*fixture
	for i := range 2 {
		f := newFixture(t, func(f *fixture, _ *llm.Config) { f.worktrees = shared })
		fs = append(fs, f)
		gate := filepath.Join(t.TempDir(), "go-on")
		f.TwoVariants(gate)
		t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })
		f.write("which.txt", fmt.Sprintf("repository %d\n", i))
		f.git("add", "-A")
		f.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "which")
		f.submit(schemas.PipelineReview, "add Add(a, b int) int to package calc")
		f.pipelineOf("add")
		f.Send("S1", "user", pipeline.Name, schemas.TypeVariantRequest, schemas.VariantRequest{DAGID: "d1", NodeID: "add", Approach: scripted.Counting})
		var v1 *projections.Variant
		f.Eventually(30*time.Second, "the variant's worktree", func() bool {
			gs, _ := f.Store.VariantGroups(f.Ctx, projections.PipelineFilter{Node: "add"})
			if len(gs) == 1 {
				v1 = gs[0].Variant("v1")
			}
			return v1 != nil && v1.Worktree != ""
		})
		v1s = append(v1s, v1.Worktree)
	}
	if v1s[0] == v1s[1] {
		t.Fatalf("both repositories' variants in %s", v1s[0])
	}
	for i, f := range fs {
		if got, want := f.read(v1s[i], "which.txt"), fmt.Sprintf("repository %d\n", i); got != want {
			t.Fatalf("worktree %s holds %q, want %q", v1s[i], got, want)
		}
		if list := f.git("worktree", "list"); !strings.Contains(list, v1s[i]) || strings.Contains(list, v1s[1-i]) {
			t.Fatalf("repository %d lists its worktrees as:\n%s", i, list)
		}
	}
}
