package worker

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
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// promptFixture runs the three workers with a PromptLoop over a fake endpoint.
type promptFixture struct {
	*llmtest.Stack
	t   *testing.T
	srv *llmtest.Server
	dir string
	pl  *PromptLoop
	// beforeRedelivery runs when a crashing worker has failed its first
	// delivery.
	beforeRedelivery func()
}

func newPromptFixture(t *testing.T, lim Limits) *promptFixture {
	t.Helper()
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	client, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Backoff: time.Millisecond, Timeout: 5 * time.Second},
		llm.Deps{Records: st.Store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ex := &Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}}
	pl := &PromptLoop{LLM: client, Executors: ex, Records: st.Store, Limits: lim}
	return &promptFixture{Stack: st, t: t, srv: srv, dir: t.TempDir(), pl: pl}
}

// worker runs agent's Worker; crash makes its first delivery fail after the
// loop ran, before the outcome is appended.
func (f *promptFixture) worker(agent string, crash bool) *atomic.Int32 {
	w := &Worker{Agent: agent, Executors: f.pl.Executors, Records: f.Store, Judge: ByExit, Prompter: f.pl}
	var deliveries atomic.Int32
	f.Run(agent, agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		outs, err := w.Handle(ctx, d)
		if deliveries.Add(1) == 1 && crash && err == nil {
			if f.beforeRedelivery != nil {
				f.beforeRedelivery()
			}
			return nil, agents.Transient(errors.New("crash before the outcome is appended"), time.Millisecond)
		}
		return outs, err
	}))
	return &deliveries
}

func (f *promptFixture) dispatch(agent, prompt string) {
	f.Send("S1", "orchestrator", agent, schemas.TypeTaskDispatch, schemas.TaskDispatch{
		DAGID: "d1", NodeID: "n1", Attempt: 1, Agent: agent, Prompt: prompt, WorkDir: f.dir,
	})
}

func (f *promptFixture) outcome(agent string) *schemas.Envelope {
	f.t.Helper()
	f.Eventually(20*time.Second, "an outcome and the dispatch acked", func() bool {
		return f.Count(schemas.TypeTaskComplete)+f.Count(schemas.TypeTaskFailed) == 1 && f.Idle(agent)
	})
	if evs := f.Events(schemas.TypeTaskComplete); len(evs) == 1 {
		return evs[0]
	}
	return f.Events(schemas.TypeTaskFailed)[0]
}

func call(id, name, args string) llmtest.ToolCall { return llmtest.Call(id, name, args) }

// The Engineer's loop: tool calls through the executor, recorded, results fed
// back, the final answer as the summary.
func TestEngineerLoopCallsToolsAndCompletes(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.srv.Script(
		llmtest.Tools(call("c1", "write_file", `{"path": "hello.txt", "content": "hi\n"}`)),
		llmtest.Tools(call("c2", "exec", `{"argv": ["cat", "hello.txt"]}`)),
		llmtest.Text("Wrote hello.txt; cat shows hi."),
	)
	f.worker("engineer", false)
	f.dispatch("engineer", "create hello.txt containing hi")
	out := f.outcome("engineer")
	done, err := schemas.PayloadAs[schemas.TaskComplete](out)
	if err != nil || done.Summary != "Wrote hello.txt; cat shows hi." || !strings.Contains(done.Evidence, "exec:") {
		t.Fatalf("outcome %s %+v %v", out.Type, done, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "hello.txt")); string(b) != "hi\n" {
		t.Fatalf("hello.txt = %q", b)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	// Lazy tool loading: the core tools and request_tools are offered, the
	// others are in the manifest only.
	if offered := strings.Join(reqs[0].ToolNames(), ","); offered != "edit_file,exec,read_file,request_tools,write_file" {
		t.Fatalf("tools offered %s", offered)
	}
	if sys := reqs[0].System(); !strings.Contains(sys, "git_commit: ") || !strings.Contains(sys, "Reading: tool-use") {
		t.Fatalf("the system prompt lacks the manifest or the tool-use skill:\n%s", sys)
	}
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	if last.Role != "tool" || last.ToolCallID != "c2" || !strings.Contains(last.Content, "hi") {
		t.Fatalf("last message of the third call: %+v", last)
	}
	if n := f.Count(schemas.TypeToolResult); n != 2 {
		t.Fatalf("%d tool results recorded, want 2", n)
	}
}

// Three failed tool calls in a row stop the node with a task_help, after a
// warning; no further model call is made.
func TestThreeStrikesAskForHelp(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.srv.Script(
		llmtest.Tools(call("c1", "exec", `{"argv": ["false"]}`)),
		llmtest.Tools(call("c2", "exec", `{"argv": ["sh", "-c", "exit 2"]}`)),
		llmtest.Tools(call("c3", "exec", `not json`)),
	)
	f.worker("engineer", false)
	f.dispatch("engineer", "make the build pass")
	out := f.outcome("engineer")
	failed, err := schemas.PayloadAs[schemas.TaskFailed](out)
	if err != nil || failed.Retryable || !strings.Contains(failed.Error, "needs help") {
		t.Fatalf("outcome %s %+v", out.Type, failed)
	}
	helps := llmtest.Payloads[schemas.TaskHelp](f.Stack, schemas.TypeTaskHelp)
	if len(helps) != 1 || len(helps[0].Failures) != 3 || !strings.Contains(helps[0].Reason, "3 tool calls in a row failed") ||
		f.Events(schemas.TypeTaskHelp)[0].Target != "orchestrator" {
		t.Fatalf("task_help %+v", helps)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3 (none after the third strike)", len(reqs))
	}
	if strings.Contains(reqs[1].System(), "FAILURE WARNING") || !strings.Contains(reqs[2].System(), "FAILURE WARNING") {
		t.Fatal("the warning must come with the call after the second failure, not before")
	}
}

// A redelivery after a crash replays the loop from the records: no model call
// and no tool runs twice.
func TestPromptLoopReplaysOnRedelivery(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	f.srv.Script(
		llmtest.Tools(call("c1", "exec", `{"command": "echo ran >> runs.txt", "shell": true}`)),
		llmtest.Text("done"),
	)
	deliveries := f.worker("engineer", true)
	f.dispatch("engineer", "append to runs.txt")
	out := f.outcome("engineer")
	if out.Type != schemas.TypeTaskComplete || deliveries.Load() != 2 {
		t.Fatalf("outcome %s after %d deliveries", out.Type, deliveries.Load())
	}
	if b, _ := os.ReadFile(filepath.Join(f.dir, "runs.txt")); string(b) != "ran\n" {
		t.Fatalf("the tool ran %d times", strings.Count(string(b), "ran"))
	}
	if f.srv.Calls() != 2 {
		t.Fatalf("%d model calls across two deliveries, want 2", f.srv.Calls())
	}
}

// The Tester's verdict needs test evidence: the counts come from the output.
func TestTesterVerdictNeedsTestEvidence(t *testing.T) {
	script := `{"command": "echo '{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}'; echo '{\"Action\":\"fail\",\"Package\":\"p\",\"Test\":\"TestB\"}'", "shell": true}`
	for name, c := range map[string]struct {
		replies []llmtest.Reply
		ok      bool
		want    string
	}{
		"tests failed but the model says passed": {[]llmtest.Reply{
			llmtest.Tools(call("c1", "exec", script)), llmtest.Text(`{"passed": true, "summary": "all good"}`)}, false, "tests say 1 failed"},
		"no test run": {[]llmtest.Reply{
			llmtest.Tools(call("c1", "exec", `{"argv": ["true"]}`)), llmtest.Text(`{"passed": true, "summary": "fine"}`)}, false, "no test evidence"},
		"verdict only after asking again": {[]llmtest.Reply{
			llmtest.Tools(call("c1", "exec", `{"command": "echo '{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestA\"}'", "shell": true}`)),
			llmtest.Text("Looks fine to me."), llmtest.Text(`{"passed": true, "summary": "TestA passes"}`)}, true, "1 passed, 0 failed"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPromptFixture(t, Limits{})
			f.srv.Script(c.replies...)
			f.worker("tester", false)
			f.dispatch("tester", "run the tests")
			out := f.outcome("tester")
			if (out.Type == schemas.TypeTaskComplete) != c.ok {
				t.Fatalf("outcome %s, want ok=%v", out.Type, c.ok)
			}
			var text string
			if c.ok {
				p, _ := schemas.PayloadAs[schemas.TaskComplete](out)
				text = p.Summary
			} else {
				p, _ := schemas.PayloadAs[schemas.TaskFailed](out)
				text = p.Error
			}
			if !strings.Contains(text, c.want) {
				t.Fatalf("outcome says %q, want %q", text, c.want)
			}
			if f.Count(schemas.TypeTestResults) != 1 {
				t.Fatal("no test_results")
			}
		})
	}
}

// The limits of seed 000: tool calls per answer, tool calls in all.
func TestPromptLoopLimits(t *testing.T) {
	f := newPromptFixture(t, Limits{ToolCallsPerStep: 2, ToolCalls: 3})
	f.srv.Script(
		llmtest.Tools(call("a", "exec", `{"argv": ["true"]}`), call("b", "exec", `{"argv": ["true"]}`), call("c", "exec", `{"argv": ["true"]}`)),
		llmtest.Tools(call("d", "exec", `{"argv": ["true"]}`), call("e", "exec", `{"argv": ["true"]}`)),
	)
	f.worker("engineer", false)
	f.dispatch("engineer", "loop forever")
	out := f.outcome("engineer")
	if out.Type != schemas.TypeTaskFailed {
		t.Fatalf("outcome %s", out.Type)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Messages[len(reqs[1].Messages)-1].Content, "at most 2 tool calls per answer") {
		t.Fatalf("the third call of the first answer was not refused: %+v", reqs[len(reqs)-1].Messages)
	}
	helps := llmtest.Payloads[schemas.TaskHelp](f.Stack, schemas.TypeTaskHelp)
	if len(helps) != 1 || !strings.Contains(helps[0].Reason, "tool call limit") || f.Count(schemas.TypeToolResult) != 3 {
		t.Fatalf("help %+v after %d tool results", helps, f.Count(schemas.TypeToolResult))
	}
}
