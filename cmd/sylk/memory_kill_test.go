package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/llm/llmtest/scripted"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// TestCompactionSurvivesSIGKILL runs an Inspector prompt node on a real
// `sylk serve` with a small context window, so that its conversation is
// checkpointed and compacted; the model hangs on the first call after the
// compaction, and the server is SIGKILLed there. After the restart the
// Inspector goes on from the stream: the calls recorded before the kill are
// not made again, the checkpoint and the compaction are not written again,
// and the one call the kill cut off is made again, with the summary in place
// of the old turns.
func TestCompactionSurvivesSIGKILL(t *testing.T) {
	bin, data, work := smallWindowServe(t, "")
	os.WriteFile(filepath.Join(work, "big.txt"), []byte(strings.Repeat("a line of the file to read\n", 45)), 0o644)
	os.WriteFile(filepath.Join(work, "plan.yaml"), []byte("name: read\nnodes:\n  - {id: read, agent: inspector, prompt: read big.txt until you know it}\n"), 0o644)

	var hung atomic.Int32
	srv := llmtest.New(t)
	srv.Respond(func(req llmtest.Request) llmtest.Reply {
		compacted := slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool { return strings.Contains(m.Content, "[Memory checkpoint") })
		if strings.Contains(req.System(), "You are the Inspector") && compacted && hung.Add(1) == 1 {
			return llmtest.Hanging() // the server is killed while this call waits
		}
		return scripted.Memory(req)
	})
	t.Setenv("SYLK_LLM_BASE_URL", srv.URL())
	t.Setenv("SYLK_LLM_MODEL", "fake")

	serve := startServe(t, bin, data, work)
	submitted := submitPlan(t, bin, data, work)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	log, done := connectData(t, data)
	count := func(typ schemas.Type) []*events.Event {
		evs, err := log.Read(ctx, events.Filter{Session: submitted.Session, Type: typ}.Subject(), events.Cursor{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	brokertest.Eventually(t, 2*time.Minute, "the first call after the compaction", func() bool { return hung.Load() == 1 })
	// The Inspector waits on that call: what the stream holds now is what
	// it held at the kill.
	checkpoints, compactions := len(count(schemas.TypeMemoryCheckpoint)), len(count(schemas.TypeMemoryCompacted))
	done()
	serve.kill(t)
	before := srv.Calls()
	if checkpoints == 0 || compactions != 1 {
		t.Fatalf("before the kill: %d checkpoints, %d compactions", checkpoints, compactions)
	}

	serve = startServe(t, bin, data, work)
	defer serve.stop(t)
	log, done = connectData(t, data)
	defer done()
	var outcome *schemas.WorkflowComplete
	brokertest.Eventually(t, 2*time.Minute, "the workflow completes after the restart", func() bool {
		evs, err := log.Read(ctx, events.Filter{Session: submitted.Session, Type: schemas.TypeWorkflowComplete}.Subject(), events.Cursor{}, 0)
		if err != nil || len(evs) == 0 {
			return false
		}
		outcome, _ = schemas.PayloadAs[schemas.WorkflowComplete](evs[0].Env)
		return true
	})
	if outcome.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("outcome %+v", outcome)
	}
	if n, m := len(count(schemas.TypeMemoryCheckpoint)), len(count(schemas.TypeMemoryCompacted)); n != checkpoints || m != 1 {
		t.Fatalf("after the restart: %d checkpoints (%d before), %d compactions", n, checkpoints, m)
	}

	// One call after the restart: the one the kill cut off, the summary in
	// it; every call before it was answered from the stream.
	reqs := srv.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d LLM calls after the restart, want 1 (the call cut off by the kill)", len(reqs)-before)
	}
	cut, again := requestKey(t, reqs[before-1]), requestKey(t, reqs[before])
	if cut != again || !strings.Contains(again, "[Memory checkpoint") {
		t.Fatalf("the call after the restart is not the one cut off:\ncut:   %.300s\nagain: %.300s", cut, again)
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

// smallWindowServe is the binary, and the data and work directories, of a
// `sylk serve` whose model's window is 6000 tokens (500 reserved), its
// project's config file with more (extra) besides.
func smallWindowServe(t *testing.T, extra string) (bin, data, work string) {
	dir := t.TempDir()
	data, work = filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(filepath.Join(work, ".sylk"), 0o755)
	os.WriteFile(filepath.Join(work, ".sylk", "config.yaml"), []byte("llm: {max_context_tokens: 6000, reserve_tokens: 500, no_stream: true}\n"+extra), 0o644)
	return sylkBinary(t), data, work
}

// requestKey is a request's messages, to compare two requests.
func requestKey(t *testing.T, r llmtest.Request) string {
	b, err := json.Marshal(r.Messages)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// connectData connects to the server of data as its server.json says.
func connectData(t *testing.T, data string) (*events.Log, func()) {
	t.Helper()
	info, err := broker.ReadInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return events.New(js), nc.Close
}
