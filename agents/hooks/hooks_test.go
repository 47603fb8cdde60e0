package hooks_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/guide"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/worker"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// fixture runs an agent's prompt loop over the scripted endpoint with a hook
// pipeline: built-in hooks, user hooks whose programs live in dir.
type fixture struct {
	*llmtest.Stack
	t     *testing.T
	srv   *llmtest.Server
	dir   string
	progs *tools.Executor
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	progs, err := tools.NewExecutor(tools.Options{WorkDir: dir, Permissions: tools.DefaultPolicy(),
		Kill: tools.KillOptions{SIGINTGrace: 100 * time.Millisecond, SIGTERMGrace: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{Stack: llmtest.NewStack(t), t: t, srv: llmtest.New(t), dir: dir, progs: progs}
}

// script writes an executable hook program and returns its path.
func (f *fixture) script(name, body string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// pipeline is the built-in tool hooks plus extra hooks and the user hooks cfgs.
func (f *fixture) pipeline(extra []hooks.Hook, cfgs ...hooks.Config) *hooks.Pipeline {
	f.t.Helper()
	policy := tools.DefaultPolicy()
	user, err := hooks.FromConfig(cfgs, f.progs)
	if err != nil {
		f.t.Fatal(err)
	}
	all := append(hooks.Builtins{Policy: &policy, Redactor: f.progs.Redactor()}.Hooks(), extra...)
	p, err := hooks.New(f.Store, append(all, user...)...)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// client is an LLM client of the scripted endpoint with these budgets.
func (f *fixture) client(budgets llm.Budgets) *llm.Client {
	f.t.Helper()
	client, err := llm.NewClient(llm.Config{BaseURL: f.srv.URL(), Model: "fake", NoStream: true, Backoff: time.Millisecond, Timeout: 5 * time.Second,
		Budgets: budgets}, llm.Deps{Records: f.Store})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { client.Close() })
	return client
}

// run runs agent's worker with a prompt loop hooked by p; with crash, its
// first delivery fails after the loop ran, so the message is redelivered.
func (f *fixture) run(agent string, p *hooks.Pipeline, crash bool) *atomic.Int32 {
	return f.runWith(f.client(llm.Budgets{}), agent, p, crash)
}

func (f *fixture) runWith(client *llm.Client, agent string, p *hooks.Pipeline, crash bool) *atomic.Int32 {
	f.t.Helper()
	ex := &worker.Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}, DefaultDir: f.dir}
	w := &worker.Worker{Agent: agent, Executors: ex, Records: f.Store, Judge: worker.ByExit,
		Prompter: &worker.PromptLoop{LLM: client, Executors: ex, Records: f.Store, Hooks: p}}
	var deliveries atomic.Int32
	f.Run(agent, agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		outs, err := w.Handle(ctx, d)
		if deliveries.Add(1) == 1 && crash && err == nil {
			return nil, agents.Transient(errors.New("crash before the outcome is appended"), time.Millisecond)
		}
		return outs, err
	}), func(o *agents.Options) { o.Hooks = p })
	return &deliveries
}

func (f *fixture) dispatch(agent, prompt string) {
	f.Send("S1", "orchestrator", agent, schemas.TypeTaskDispatch, schemas.TaskDispatch{
		DAGID: "d1", NodeID: "n1", Attempt: 1, Agent: agent, Prompt: prompt, WorkDir: f.dir})
}

func (f *fixture) done(agent string) {
	f.t.Helper()
	f.Eventually(20*time.Second, "an outcome and the dispatch acked", func() bool {
		return f.Count(schemas.TypeTaskComplete)+f.Count(schemas.TypeTaskFailed) == 1 && f.Idle(agent)
	})
}

// toolMessage is the content of the tool message answering call id in the
// requests the endpoint received.
func (f *fixture) toolMessage(id string) string {
	f.t.Helper()
	for _, r := range f.srv.Requests() {
		for _, m := range r.Messages {
			if m.Role == "tool" && m.ToolCallID == id {
				return m.Content
			}
		}
	}
	f.t.Fatalf("no request carried the result of tool call %s", id)
	return ""
}

func (f *fixture) decisions() []*schemas.HookDecision {
	return llmtest.Payloads[schemas.HookDecision](f.Stack, schemas.TypeHookDecision)
}

const denyRM = `in=$(cat)
echo "$in" >> runs.log
case "$in" in
  *'"argv":["rm"'*) echo '{"decision": "block", "reason": "rm is not allowed here; list what you would remove instead"}' ;;
esac
`

// A user hook denies exec of rm: the file stays, the model's next request
// carries the hook's reason as the tool's result, and the decision is an
// event. exec of anything else goes on.
func TestUserHookDeniesRM(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.dir, "keep.txt"), []byte("x"), 0o644)
	p := f.pipeline(nil, hooks.Config{Name: "no-rm", Point: "pre_tool", Trigger: []string{"exec"}, Command: []string{f.script("no-rm.sh", denyRM)}, Timeout: "5s"})
	f.srv.Script(
		llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["rm", "keep.txt"]}`)),
		llmtest.Tools(llmtest.Call("c2", "exec", `{"argv": ["ls"]}`)),
		llmtest.Text("could not remove keep.txt"),
	)
	f.run("engineer", p, false)
	f.dispatch("engineer", "remove keep.txt")
	f.done("engineer")
	if _, err := os.Stat(filepath.Join(f.dir, "keep.txt")); err != nil {
		t.Fatalf("rm ran: %v", err)
	}
	if got := f.toolMessage("c1"); !strings.Contains(got, "blocked by hook no-rm: rm is not allowed here") {
		t.Fatalf("the model saw %q, want the hook's reason", got)
	}
	if got := f.toolMessage("c2"); !strings.Contains(got, "keep.txt") {
		t.Fatalf("ls was not run: %q", got)
	}
	var blocks int
	for _, d := range f.decisions() {
		if d.Action == "block" && d.By == "no-rm" && d.Tool == "exec" && d.Point == "pre_tool" {
			blocks++
		}
	}
	if blocks != 1 {
		t.Fatalf("%d recorded blocks, want 1: %+v", blocks, f.decisions())
	}
	if n := f.Count(schemas.TypeToolResult); n != 1 {
		t.Fatalf("%d tool results, want only ls's", n)
	}
}

// A redelivered dispatch applies the recorded decisions: the hook program
// does not run again, rm is still blocked, and nothing is called twice.
func TestRedeliveryReusesHookDecisions(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.dir, "keep.txt"), []byte("x"), 0o644)
	p := f.pipeline(nil, hooks.Config{Name: "no-rm", Point: "pre_tool", Trigger: []string{"exec"}, Command: []string{f.script("no-rm.sh", denyRM)}})
	f.srv.Script(
		llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["rm", "keep.txt"]}`)),
		llmtest.Text("gave up"),
	)
	deliveries := f.run("engineer", p, true)
	f.dispatch("engineer", "remove keep.txt")
	f.done("engineer")
	if deliveries.Load() != 2 {
		t.Fatalf("%d deliveries, want 2", deliveries.Load())
	}
	runs, _ := os.ReadFile(filepath.Join(f.dir, "runs.log"))
	if n := strings.Count(string(runs), "\n"); n != 1 {
		t.Fatalf("the hook program ran %d times, want once", n)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "keep.txt")); err != nil || f.srv.Calls() != 2 {
		t.Fatalf("after the redelivery: keep.txt %v, %d model calls (want 2)", err, f.srv.Calls())
	}
	if n := len(f.decisions()); n != 1 {
		t.Fatalf("%d hook_decision events, want 1", n)
	}
}

// addsContext returns an in-process hook at pre_prompt that adds its name.
func addsContext(name string, prio hooks.Priority) hooks.Hook {
	return hooks.Hook{Name: name, Point: hooks.PrePrompt, Priority: prio, Source: "builtin",
		Run: func(context.Context, *hooks.Data) (hooks.Decision, error) {
			return hooks.Decision{Context: "[" + name + "]"}, nil
		}}
}

// Hooks run by priority, ties in registration order, user hooks included:
// the system prompt the endpoint received shows the order.
func TestHookOrderFollowsPriorities(t *testing.T) {
	f := newFixture(t)
	p := f.pipeline([]hooks.Hook{addsContext("late", hooks.Late), addsContext("normal-a", hooks.Normal), addsContext("first", hooks.First),
		addsContext("normal-b", hooks.Normal), addsContext("last", hooks.Last), addsContext("early", hooks.Early)},
		hooks.Config{Name: "user-early", Point: "pre_prompt", Priority: "early", Command: []string{f.script("ctx.sh", `cat >/dev/null; echo '{"decision":"continue","context":"[user-early]"}'`)}},
		hooks.Config{Name: "user-30", Point: "pre_prompt", Priority: "30", Command: []string{f.script("ctx30.sh", `cat >/dev/null; echo '{"decision":"continue","context":"[user-30]"}'`)}},
	)
	f.srv.Script(llmtest.Text("done"))
	f.run("engineer", p, false)
	f.dispatch("engineer", "nothing")
	f.done("engineer")
	sys := f.srv.Requests()[0].System()
	want := "[first]\n[early]\n[user-early]\n[user-30]\n[normal-a]\n[normal-b]\n[late]\n[last]"
	if !strings.HasSuffix(sys, want) {
		t.Fatalf("system prompt ends %q, want the hooks' context in order %q", sys[max(0, len(sys)-200):], want)
	}
	var names []string
	for _, h := range p.Order(hooks.PrePrompt) {
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "first early user-early user-30 normal-a normal-b late last" {
		t.Fatalf("Order(pre_prompt) = %s", got)
	}
}

// A hook that hangs is killed at its timeout; failing open, the call goes
// on, and the failure is recorded with the reason.
func TestHangingHookKilledAtTimeout(t *testing.T) {
	f := newFixture(t)
	p := f.pipeline(nil, hooks.Config{Name: "hang", Point: "pre_tool", Command: []string{f.script("hang.sh", "sleep 60\n")}, Timeout: "300ms"})
	f.srv.Script(llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["true"]}`)), llmtest.Text("done"))
	f.run("engineer", p, false)
	start := time.Now()
	f.dispatch("engineer", "run true")
	f.done("engineer")
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s: the hook was not killed at 300ms", took)
	}
	ds := f.decisions()
	if len(ds) != 1 || len(ds[0].Hooks) == 0 {
		t.Fatalf("decisions %+v", ds)
	}
	v := ds[0].Hooks[len(ds[0].Hooks)-1]
	if v.Hook != "hang" || !strings.Contains(v.Failed, "killed at its timeout of 300ms") || v.FailMode != "open" || ds[0].Action != "continue" {
		t.Fatalf("verdict %+v of %+v", v, ds[0])
	}
	if f.Count(schemas.TypeToolResult) != 1 {
		t.Fatal("failing open, the tool should have run")
	}
}

// The git permission matrix refuses a commit by the Inspector, through exec
// as much as through git_commit; git status is read, and allowed.
func TestGitMatrixRefusesInspectorCommit(t *testing.T) {
	f := newFixture(t)
	p := f.pipeline(nil)
	// Successful calls in between keep the three-strike rule from stopping
	// the loop before the model is shown the refusals.
	f.srv.Script(
		llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["git", "commit", "-am", "fix"]}`), llmtest.Call("ok1", "exec", `{"argv": ["true"]}`),
			llmtest.Call("c2", "exec", `{"command": "git add . && git commit -m fix", "shell": true}`)),
		llmtest.Tools(llmtest.Call("c3", "git_commit", `{"message": "fix"}`), llmtest.Call("ok2", "exec", `{"argv": ["true"]}`)),
		llmtest.Text(`{"passed": false, "summary": "cannot commit"}`),
	)
	f.run("inspector", p, false)
	f.dispatch("inspector", "commit the fix")
	f.done("inspector")
	for _, id := range []string{"c1", "c2"} {
		if got := f.toolMessage(id); !strings.Contains(got, "blocked by hook git_permissions: git permission matrix: git commit is a commit operation, which the inspector may not run") &&
			!strings.Contains(got, "git add is a commit operation") {
			t.Fatalf("%s: the model saw %q", id, got)
		}
	}
	if got := f.toolMessage("c3"); !strings.Contains(got, "blocked by hook permission_check: the inspector may not call git_commit") {
		t.Fatalf("c3: the model saw %q", got)
	}
	for _, c := range llmtest.Payloads[schemas.ToolCall](f.Stack, schemas.TypeToolCall) {
		if c.Tool != "exec" || c.Args["argv"].([]any)[0] != "true" {
			t.Fatalf("a refused call ran: %+v", c)
		}
	}
}

// Hook programs that fail each way: failing open, the tool runs and the
// failure is recorded; failing closed, the tool is blocked with the failure
// as the reason. Neither stops the agent.
func TestFailingHooksOpenAndClosed(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"garbage":          {"cat >/dev/null; echo 'sure, go ahead'\n", "its output is not a decision"},
		"unknown decision": {`cat >/dev/null; echo '{"decision": "maybe"}'` + "\n", `unknown decision "maybe"`},
		"unknown key":      {`cat >/dev/null; echo '{"decison": "block"}'` + "\n", "unknown field"},
		"crash":            {"cat >/dev/null; kill -SEGV $$\n", "SIGSEGV"},
		"exit status":      {"cat >/dev/null; echo oops >&2; exit 3\n", "exit status 3"},
		"missing program":  {"", "not found"},
		"block at post":    {`cat >/dev/null; echo '{"decision": "answer", "answer": "x"}'` + "\n", "answer is possible only at pre_tool"},
	}
	for name, c := range cases {
		for _, mode := range []string{"open", "closed"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				f := newFixture(t)
				cmd := filepath.Join(f.dir, "missing.sh")
				if c.body != "" {
					cmd = f.script("hook.sh", c.body)
				}
				point := "pre_tool"
				if name == "block at post" {
					point = "post_tool"
				}
				p := f.pipeline(nil, hooks.Config{Name: "bad", Point: point, Command: []string{cmd}, Fail: mode})
				f.srv.Script(llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["sh", "-c", "echo ran"]}`)), llmtest.Text("done"))
				f.run("engineer", p, false)
				f.dispatch("engineer", "run it")
				f.done("engineer")
				ds := f.decisions()
				if len(ds) != 1 {
					t.Fatalf("%d decisions: %+v", len(ds), ds)
				}
				var v schemas.HookVerdict
				for _, h := range ds[0].Hooks {
					if h.Hook == "bad" {
						v = h
					}
				}
				if !strings.Contains(v.Failed, c.want) || v.FailMode != mode {
					t.Fatalf("verdict %+v, want a failure saying %q, fail mode %s", v, c.want, mode)
				}
				got := f.toolMessage("c1")
				ran := f.Count(schemas.TypeToolResult) == 1
				switch {
				case mode == "open" && (!ran || !strings.Contains(got, "ran")):
					t.Fatalf("failing open the tool should run and be shown: ran=%v %q", ran, got)
				case mode == "closed" && point == "pre_tool" && (ran || !strings.Contains(got, "the hook failed and fails closed")):
					t.Fatalf("failing closed the tool should be blocked: ran=%v %q", ran, got)
				case mode == "closed" && point == "post_tool" && (!ran || strings.Contains(got, "ran\n") || !strings.Contains(got, "fails closed")):
					t.Fatalf("failing closed after the tool, its result should be withheld: %q", got)
				}
			})
		}
	}
}

// Step 0: work outside an agent's domain goes back to the Guide as a
// reroute_request naming the owner; the handler never sees it.
func TestStep0ReroutesWorkOutsideTheDomain(t *testing.T) {
	f := newFixture(t)
	p, err := hooks.New(f.Store, hooks.Builtins{NoGit: true, Owner: guide.Owner,
		Domains: map[string][]schemas.Type{"engineer": {schemas.TypeTaskDispatch}}}.Hooks()...)
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int32
	f.Run("engineer", agents.HandlerFunc(func(context.Context, *agents.Delivery) ([]*schemas.Envelope, error) {
		handled.Add(1)
		return nil, nil
	}), func(o *agents.Options) { o.Hooks = p })
	req := f.Send("S1", "user", "engineer", schemas.TypeContextRequest, schemas.ContextRequest{Query: "where is the auth middleware?"})
	f.Eventually(10*time.Second, "a reroute_request", func() bool { return f.Count(schemas.TypeRerouteRequest) == 1 && f.Idle("engineer") })
	rr := f.Events(schemas.TypeRerouteRequest)[0]
	pl, _ := schemas.PayloadAs[schemas.RerouteRequest](rr)
	if rr.Target != "guide" || rr.ParentID != req.ID || pl.SuggestedTarget != "librarian" || !strings.Contains(pl.Reason, "context_request is not the engineer's work") {
		t.Fatalf("reroute %+v %+v", rr, pl)
	}
	if handled.Load() != 0 {
		t.Fatal("the handler ran")
	}
}

// outcome is the text of the node's task_complete or task_failed.
func (f *fixture) outcome() string {
	f.t.Helper()
	if ps := llmtest.Payloads[schemas.TaskComplete](f.Stack, schemas.TypeTaskComplete); len(ps) == 1 {
		return "complete: " + ps[0].Summary
	}
	return "failed: " + llmtest.Payloads[schemas.TaskFailed](f.Stack, schemas.TypeTaskFailed)[0].Error
}

// token_budget blocks an LLM call that would pass a budget before anything
// is sent, and the task ends saying which budget.
func TestTokenBudgetBlocksTheCall(t *testing.T) {
	f := newFixture(t)
	client := f.client(llm.Budgets{Session: 20})
	p, err := hooks.New(f.Store, hooks.Builtins{NoGit: true, Budget: client}.Hooks()...)
	if err != nil {
		t.Fatal(err)
	}
	f.runWith(client, "engineer", p, false)
	f.dispatch("engineer", "write a long essay")
	f.done("engineer")
	if got := f.outcome(); !strings.Contains(got, "a hook stopped the LLM call") || !strings.Contains(got, "blocked by hook token_budget: session token budget exceeded") {
		t.Fatalf("outcome %q", got)
	}
	if f.srv.Calls() != 0 || f.Count(schemas.TypeLLMRequest) != 0 {
		t.Fatalf("%d calls made, %d recorded: the budget hook should stop them first", f.srv.Calls(), f.Count(schemas.TypeLLMRequest))
	}
	if ds := f.decisions(); len(ds) != 1 || ds[0].By != "token_budget" || ds[0].Point != "pre_prompt" {
		t.Fatalf("decisions %+v", ds)
	}
}

// session_context puts the session's context into the system prompt; the
// model's answer is shown redacted by redact_secrets.
func TestSessionContextAndRedaction(t *testing.T) {
	f := newFixture(t)
	f.Send("S1", "user", "", schemas.TypeSessionCreate, schemas.SessionCreate{Name: "work"})
	f.Send("S1", "user", "", schemas.TypeSessionContextSet, schemas.SessionContextSet{CurrentTask: "validate the config", ModifiedFiles: []string{"config.go"}})
	f.Eventually(10*time.Second, "the session's context", func() bool {
		s, err := f.Store.Session(f.Ctx, "S1")
		return err == nil && s.Context.CurrentTask != ""
	})
	p, err := hooks.New(f.Store, hooks.Builtins{NoGit: true, Sessions: f.Store, Redactor: f.progs.Redactor()}.Hooks()...)
	if err != nil {
		t.Fatal(err)
	}
	const key = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
	f.srv.Script(llmtest.Text("done; the token is " + key))
	f.run("engineer", p, false)
	f.dispatch("engineer", "check the config")
	f.done("engineer")
	if sys := f.srv.Requests()[0].System(); !strings.Contains(sys, "SESSION CONTEXT:\n- current task: validate the config\n- files modified: config.go") {
		t.Fatalf("system prompt %q", sys)
	}
	if got := f.outcome(); got != "complete: done; the token is [REDACTED]" {
		t.Fatalf("outcome %q", got)
	}
}

// Hooks answer from a cache instead of calling (a tool at pre_tool, the model
// at pre_prompt), change a tool's arguments, and see the handler's outputs
// after the message (post_message).
func TestAnswerArgsAndPostMessage(t *testing.T) {
	f := newFixture(t)
	p := f.pipeline(nil,
		hooks.Config{Name: "cache", Point: "pre_tool", Trigger: []string{"exec"}, Command: []string{f.script("cache.sh", `case "$(cat)" in
  *'"go","test"'*) echo '{"decision": "answer", "answer": "cached: 42 tests pass"}' ;;
  *'"echo","x"'*) echo '{"decision": "continue", "args": {"argv": ["echo", "changed"]}}' ;;
esac
`)}},
		hooks.Config{Name: "model-cache", Point: "pre_prompt", Command: []string{f.script("model.sh", `case "$(cat)" in
  *'cached: 42 tests pass'*) echo '{"decision": "answer", "answer": "all 42 tests pass"}' ;;
esac
`)}},
		hooks.Config{Name: "outputs", Point: "post_message", Command: []string{f.script("outputs.sh", "cat > outputs.json\n")}},
	)
	f.srv.Script(llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["echo", "x"]}`), llmtest.Call("c2", "exec", `{"argv": ["go", "test", "./..."]}`)))
	f.run("engineer", p, false)
	f.dispatch("engineer", "run the tests")
	f.done("engineer")
	if got := f.outcome(); got != "complete: all 42 tests pass" || f.srv.Calls() != 1 {
		t.Fatalf("outcome %q after %d model calls, want the cached answer after 1", got, f.srv.Calls())
	}
	calls := llmtest.Payloads[schemas.ToolCall](f.Stack, schemas.TypeToolCall)
	if len(calls) != 1 || calls[0].Args["argv"].([]any)[1] != "changed" {
		t.Fatalf("tool calls %+v, want only echo with the changed argument", calls)
	}
	out, _ := os.ReadFile(filepath.Join(f.dir, "outputs.json"))
	if !strings.Contains(string(out), `"point":"post_message"`) || !strings.Contains(string(out), `"type":"task_complete"`) {
		t.Fatalf("post_message saw %s", out)
	}
}

// A hook program returns events: each is checked against the message
// catalogue and the type's published schema, recorded in the decision, and
// appended with the agent's outputs under an id derived from the decision's
// record, so a redelivery appends it again as the same event (a duplicate
// the stream drops) without running the program.
func TestHookProgramReturnsEvents(t *testing.T) {
	f := newFixture(t)
	note := f.script("note.sh", `in=$(cat)
echo run >> runs.log
echo '{"decision": "continue", "events": [{"type": "history_entry", "target": "archivalist",
  "payload": {"category": "decision", "summary": "exec ran under review", "tags": ["audit"]}}]}'
`)
	p := f.pipeline(nil, hooks.Config{Name: "audit", Point: "post_tool", Trigger: []string{"exec"}, Command: []string{note}})
	f.srv.Script(llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["true"]}`)), llmtest.Text("done"))
	deliveries := f.run("engineer", p, true)
	dispatch := f.Send("S1", "orchestrator", "engineer", schemas.TypeTaskDispatch, schemas.TaskDispatch{
		DAGID: "d1", NodeID: "n1", Attempt: 1, Agent: "engineer", Prompt: "run true", WorkDir: f.dir})
	f.done("engineer")
	if deliveries.Load() != 2 {
		t.Fatalf("%d deliveries, want 2", deliveries.Load())
	}
	if runs, _ := os.ReadFile(filepath.Join(f.dir, "runs.log")); string(runs) != "run\n" {
		t.Fatalf("the hook program ran %q, want once", runs)
	}
	ds := f.decisions()
	if len(ds) != 1 || len(ds[0].Events) != 1 || ds[0].Events[0].Type != schemas.TypeHistoryEntry {
		t.Fatalf("decisions %+v", ds)
	}
	evs := f.Events(schemas.TypeHistoryEntry)
	if len(evs) != 1 {
		t.Fatalf("%d history entries appended, want 1", len(evs))
	}
	e := evs[0]
	h, err := schemas.PayloadAs[schemas.HistoryEntry](e)
	if err != nil || h.Summary != "exec ran under review" || h.Tags[0] != "audit" || e.Source != "engineer" || e.Target != "archivalist" {
		t.Fatalf("appended %+v %+v %v", e, h, err)
	}
	if want := schemas.DeriveID(dispatch, "engineer/"+ds[0].Events[0].Key); e.ID != want {
		t.Fatalf("event id %s, want %s derived from the record", e.ID, want)
	}
}

// Events a hook program may not return: the hook fails with a reason naming
// the event and the field, the failure is recorded, nothing is appended, and
// failing open the tool runs.
func TestHookProgramEventsRefused(t *testing.T) {
	cases := map[string]struct{ events, want string }{
		"unknown type":  {`[{"type": "teleport", "payload": {}}]`, `its events[0] (teleport): not a message type`},
		"missing field": {`[{"type": "history_entry", "payload": {"category": "decision"}}]`, `its events[0] (history_entry): payload: missing property 'summary'`},
		"wrong type":    {`[{"type": "history_entry", "payload": {"category": "decision", "summary": 7}}]`, `payload.summary: got number, want string`},
		"unknown field": {`[{"type": "history_entry", "payload": {"category": "d", "summary": "s", "colour": 1}}]`, `unknown field "colour"`},
		"a call record": {`[{"type": "tool_result", "payload": {"call_id": "x", "tool": "exec"}}]`, `its events[0] (tool_result): records a tool or LLM call`},
		"bad target":    {`[{"type": "history_entry", "target": "a b", "payload": {"category": "d", "summary": "s"}}]`, `target "a b" is not an agent name`},
		"no type":       {`[{"payload": {}}]`, `its events[0] has no type`},
		"not a list":    {`{"type": "history_entry"}`, `its output is not a decision`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			cmd := f.script("hook.sh", "cat >/dev/null; echo '{\"decision\": \"continue\", \"events\": "+c.events+"}'\n")
			p := f.pipeline(nil, hooks.Config{Name: "emit", Point: "pre_tool", Command: []string{cmd}})
			f.srv.Script(llmtest.Tools(llmtest.Call("c1", "exec", `{"argv": ["sh", "-c", "echo ran"]}`)), llmtest.Text("done"))
			f.run("engineer", p, false)
			f.dispatch("engineer", "run it")
			f.done("engineer")
			ds := f.decisions()
			if len(ds) != 1 || len(ds[0].Hooks) == 0 || len(ds[0].Events) != 0 {
				t.Fatalf("decisions %+v", ds)
			}
			v := ds[0].Hooks[len(ds[0].Hooks)-1]
			if v.Hook != "emit" || !strings.Contains(v.Failed, c.want) || v.FailMode != "open" {
				t.Fatalf("verdict %+v, want a failure saying %q", v, c.want)
			}
			if f.Count(schemas.TypeHistoryEntry) != 0 || f.Count(schemas.TypeToolResult) != 1 {
				t.Fatalf("%d history entries, %d tool results", f.Count(schemas.TypeHistoryEntry), f.Count(schemas.TypeToolResult))
			}
		})
	}
}
