package run

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// planner answers as the Guide and the Architect would: a plan that touches
// first.txt, or second.txt once the user asked for that, or a question when
// the request is vague and nobody answered it yet.
func planner(req llmtest.Request) llmtest.Reply {
	all := ""
	for _, m := range req.Messages {
		all += m.Content + "\n"
	}
	switch sys := req.System(); {
	case strings.Contains(sys, "You are the Guide"):
		return llmtest.Text(`{"intent_type": "EXPLICIT", "confidence": 0.9, "reason": "bounded", "assumptions_explicit": true, "scope_bounded": true}`)
	case strings.Contains(sys, "You are the Architect") && strings.Contains(all, "better") && !strings.Contains(all, "They answered"):
		return llmtest.Text(`{"action": "clarify", "question": "Better how?", "options": ["faster", "safer"]}`)
	case strings.Contains(sys, "You are the Architect"):
		file := "first.txt"
		if strings.Contains(all, "use second") || strings.Contains(all, "They answered: safer") {
			file = "second.txt"
		}
		return llmtest.Text(`{"action": "plan", "rationale": "One step.", "plan": {"name": "touch", "nodes": [
			{"id": "touch", "agent": "engineer", "tool": "exec", "args": {"argv": ["touch", "` + file + `"]}}]}}`)
	}
	return llmtest.Status(400)
}

// requestRig runs `sylk run "REQUEST"` in process, as on a terminal, with
// stdin holding the user's answers, against a fake endpoint.
type requestRig struct {
	t   *testing.T
	dir string
	srv *llmtest.Server
}

func newRequestRig(t *testing.T) *requestRig {
	dir := t.TempDir()
	t.Chdir(dir) // the session's tools run in the working directory
	srv := llmtest.New(t)
	srv.Respond(planner)
	return &requestRig{t: t, dir: dir, srv: srv}
}

// run answers the prompts with stdin and returns what the user saw and the
// command's error.
func (r *requestRig) run(request, stdin string) (stdout, stderr string, log *events.Log, err error) {
	r.t.Helper()
	var out, errOut bytes.Buffer
	f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	f.Cfg = cmdutil.Config{Data: filepath.Join(r.dir, "data"), LLM: llm.Config{BaseURL: r.srv.URL(), Model: "fake"}}
	r.t.Cleanup(func() { f.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = runRequest(ctx, f, &RunOptions{Request: request, Interactive: true})
	log, _ = f.Log(ctx) // the broker runRequest connected to
	return out.String(), errOut.String(), log, err
}

// On a terminal the plan is put to the user: asked to change it, the
// Architect plans again with the feedback; approved, the new plan runs.
func TestRequestOnATerminalModifyThenApprove(t *testing.T) {
	r := newRequestRig(t)
	stdout, stderr, _, err := r.run("add input validation to the config loader", "m\nuse second.txt\ny\n")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if n := strings.Count(stdout, "Plan "); n != 2 {
		t.Fatalf("%d plans shown, want 2:\n%s", n, stdout)
	}
	for _, want := range []string{"exec: touch first.txt", "exec: touch second.txt", "✓ touch succeeded"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"Approve this plan? [y]es, [n]o (reject), [m]odify: ", "What should change? ", "asking the Architect for a new plan"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "second.txt")); err != nil {
		t.Fatal("the modified plan did not run:", err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "first.txt")); err == nil {
		t.Fatal("the first plan ran")
	}
	if calls := r.srv.Calls(); calls != 3 {
		t.Fatalf("%d LLM calls, want 3 (classify, plan, plan again)", calls)
	}
}

// Rejected at the prompt, the plan is dropped, nothing runs and the exit
// code says the work was not done.
func TestRequestOnATerminalReject(t *testing.T) {
	r := newRequestRig(t)
	_, stderr, log, err := r.run("add input validation to the config loader", "maybe\nn\n")
	var code cmdutil.ExitCodeError
	if !errors.As(err, &code) || code.Code != cmdutil.ExitFailure {
		t.Fatalf("err = %v, want exit %d\n%s", err, cmdutil.ExitFailure, stderr)
	}
	if !strings.Contains(stderr, "plan rejected; nothing was run") || strings.Count(stderr, "Approve this plan?") != 2 {
		t.Fatalf("stderr:\n%s", stderr)
	}
	all, rerr := log.Read(context.Background(), events.Filter{Type: schemas.TypePlanModified, Source: "user"}.Subject(), events.Cursor{}, 0)
	// The user's answer, not the Guide's routed copy of it.
	evs := slices.DeleteFunc(all, func(e *events.Event) bool { return e.Env.Metadata[agents.MetaRoutedBy] != "" })
	if rerr != nil || len(evs) != 1 {
		t.Fatalf("plan_modified from the user: %d, %v", len(evs), rerr)
	}
	if p, _ := schemas.PayloadAs[schemas.PlanModified](evs[0].Env); !p.Rejected {
		t.Fatalf("plan_modified %+v, want rejected", p)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "first.txt")); err == nil {
		t.Fatal("a rejected plan ran")
	}
}

// A question is asked on the terminal; the answer goes back and the plan
// made with it runs once approved.
func TestRequestOnATerminalAnswersAQuestion(t *testing.T) {
	r := newRequestRig(t)
	stdout, stderr, _, err := r.run("make the config better", "\nsafer\ny\n")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "architect asks: Better how?\n  - faster\n  - safer\n") || !strings.Contains(stderr, "Your answer: ") {
		t.Fatalf("the question was not asked:\n%s\n%s", stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "second.txt")); err != nil {
		t.Fatal("the plan made with the answer did not run:", err)
	}
}

// Stdin running out while a question waits ends the command with an error,
// not a hang.
func TestRequestOnATerminalEndOfInput(t *testing.T) {
	r := newRequestRig(t)
	_, _, _, err := r.run("add input validation to the config loader", "")
	if err == nil || !strings.Contains(err.Error(), "reading the answer: EOF") {
		t.Fatalf("err = %v, want the end of input", err)
	}
}
