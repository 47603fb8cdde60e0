package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// TestHandoffSurvivesSIGKILL runs a review pipeline on a real `sylk serve`
// whose small context window makes the Engineer hand its pipeline off, and
// SIGKILLs the server twice in the handoff: while the Engineer's state (the
// checkpoint call) is being written, and once the new pipeline's Engineer
// has made its first call. After each restart the work goes on from the
// stream: the one call each kill cut off is made again, no call answered
// before is made again, the state and the handoff are written once, and the
// pipeline's cap of handoffs is the config file's.
func TestHandoffSurvivesSIGKILL(t *testing.T) {
	bin, data, work := smallWindowServe(t, "pipelines: {max_handoffs: 2}\n")
	os.WriteFile(filepath.Join(work, "big.txt"), []byte(scripted.BigFile), 0o644)
	os.WriteFile(filepath.Join(work, "calc.go"), []byte("package calc\n"), 0o644)
	os.WriteFile(filepath.Join(work, "plan.yaml"), []byte("name: add\nnodes:\n  - {id: add, agent: engineer, prompt: add Add to calc, pipeline: review}\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"}} {
		if out, err := exec.Command("git", append([]string{"-C", work}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	// The model hangs once at each kill point; cut holds the requests it
	// hung on.
	var mu sync.Mutex
	var cut []string
	hungAt := func() int { mu.Lock(); defer mu.Unlock(); return len(cut) }
	srv := llmtest.New(t)
	srv.Respond(scripted.Handoff(func(at string, req llmtest.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if len(cut) != map[string]int{"checkpoint": 0, "successor": 1}[at] {
			return false
		}
		cut = append(cut, requestKey(t, req))
		return true
	}))
	t.Setenv("SYLK_LLM_BASE_URL", srv.URL())
	t.Setenv("SYLK_LLM_MODEL", "fake")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	serve := startServe(t, bin, data, work)
	submitted := submitPlan(t, bin, data, work)
	count := func(typ schemas.Type) []*events.Event {
		t.Helper()
		log, done := connectData(t, data)
		defer done()
		evs, err := log.Read(ctx, events.Filter{Session: submitted.Session, Type: typ}.Subject(), events.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	for point, want := range []struct{ checkpoints, handoffs int }{{0, 0}, {1, 1}} {
		brokertest.Eventually(t, 2*time.Minute, "the model hangs at kill point "+string(rune('1'+point)), func() bool { return hungAt() == point+1 })
		// The agent waits on that call: the stream holds now what it holds
		// at the kill.
		if n, m := len(count(schemas.TypeMemoryCheckpoint)), len(count(schemas.TypePipelineHandoff)); n != want.checkpoints || m != want.handoffs {
			t.Fatalf("at kill %d: %d checkpoints and %d handoffs, want %d and %d", point+1, n, m, want.checkpoints, want.handoffs)
		}
		serve.kill(t)
		serve = startServe(t, bin, data, work)
	}
	defer serve.stop(t)
	brokertest.Eventually(t, 2*time.Minute, "the workflow completes after the restarts", func() bool { return len(count(schemas.TypeWorkflowComplete)) == 1 })
	if wc, _ := schemas.PayloadAs[schemas.WorkflowComplete](count(schemas.TypeWorkflowComplete)[0].Env); wc.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("outcome %+v", wc)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "calc.go")); !strings.Contains(string(b), "func Add") {
		t.Fatalf("calc.go = %q", b)
	}
	for typ, want := range map[schemas.Type]int{schemas.TypeMemoryCheckpoint: 1, schemas.TypePipelineHandoffRequest: 1, schemas.TypePipelineHandoff: 1, schemas.TypeMemoryCompacted: 0} {
		if n := len(count(typ)); n != want {
			t.Fatalf("%d %s events, want %d", n, typ, want)
		}
	}
	started := count(schemas.TypePipelineStarted)
	if len(started) != 2 {
		t.Fatalf("%d pipelines started, want 2 (the first and the one its handoff started)", len(started))
	}
	for _, e := range started {
		if p, _ := schemas.PayloadAs[schemas.PipelineStarted](e.Env); p.MaxHandoffs != 2 {
			t.Fatalf("pipeline %s caps its chain at %d handoffs, want the config file's 2", p.PipelineID, p.MaxHandoffs)
		}
	}

	// Every request was made once, but the two the kills cut off: twice.
	made := map[string]int{}
	for _, r := range srv.Requests() {
		made[requestKey(t, r)]++
	}
	for key, n := range made {
		want := 1
		if slices.Contains(cut, key) {
			want = 2
		}
		if n != want {
			t.Fatalf("a request made %d times, want %d: %.300s", n, want, key)
		}
	}
	responses := map[string]bool{}
	for _, e := range count(schemas.TypeLLMResponse) {
		p, _ := schemas.PayloadAs[schemas.LLMResponse](e.Env)
		if responses[p.CallID] {
			t.Fatalf("call %s recorded twice", p.CallID)
		}
		responses[p.CallID] = true
	}
}
