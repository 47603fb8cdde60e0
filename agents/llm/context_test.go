package llm_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
)

// conversation is a task followed by n tool rounds of about 400 bytes each.
func conversation(n int) []schemas.LLMMessage {
	out := msgs("the task: fix the loader")
	for i := range n {
		out = append(out,
			schemas.LLMMessage{Role: "assistant", ToolCalls: []schemas.LLMToolCall{{ID: fmt.Sprintf("c%d", i), Name: "read_file", Arguments: `{"path":"a.go"}`}}},
			schemas.LLMMessage{Role: "tool", ToolCallID: fmt.Sprintf("c%d", i), Content: fmt.Sprintf("round %d: ", i) + strings.Repeat("x", 380)})
	}
	return out
}

// An overflowing conversation is summarised, never cut silently: the middle
// goes to the Archivalist and a summary takes its place; the task and the
// latest rounds stay; a redelivery reuses the recorded summary.
func TestFitSummarisesAndHandsOff(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.MaxContextTokens, c.ReserveTokens = 2000, 300 })
	f.srv.Script(llmtest.Text("SUMMARY: read a.go twenty times"))
	conv := conversation(20) // about 2300 tokens
	if llm.EstimateTokens(conv, nil) <= 1700 {
		t.Fatalf("the conversation fits already (%d tokens)", llm.EstimateTokens(conv, nil))
	}
	var mu sync.Mutex
	var fitted [][]schemas.LLMMessage
	f.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		out, changed, err := f.client.Fit(ctx, d, llm.FitRequest{Key: "step/3", Messages: conv, DAGID: "d1", NodeID: "n1"})
		if err != nil || !changed {
			t.Errorf("fit: changed=%v err=%v", changed, err)
		}
		mu.Lock()
		fitted = append(fitted, out)
		mu.Unlock()
		if d.Attempt == 1 {
			return nil, agents.Transient(fmt.Errorf("crash"), time.Millisecond)
		}
		return nil, nil
	}))
	f.send("go")
	f.Eventually(20*time.Second, "fitted twice", func() bool { mu.Lock(); defer mu.Unlock(); return len(fitted) == 2 && f.Idle("engineer") })
	out := fitted[0]
	if n := llm.EstimateTokens(out, nil); n > 1700 {
		t.Fatalf("fitted conversation is %d tokens, over 1700", n)
	}
	if out[0].Role != "system" || out[1].Content != conv[1].Content {
		t.Fatal("the system prompt or the task was not kept")
	}
	if !strings.Contains(out[2].Content, "SUMMARY: read a.go twenty times") || !strings.Contains(out[2].Content, "store_request") {
		t.Fatalf("summary message %q", out[2].Content)
	}
	if last := out[len(out)-1]; last.Content != conv[len(conv)-1].Content {
		t.Fatal("the latest message was not kept")
	}
	if out[3].Role == "tool" {
		t.Fatal("the kept part starts with a tool result cut from its call")
	}
	stores := llmtest.Payloads[schemas.StoreRequest](f.Stack, schemas.TypeStoreRequest)
	if len(stores) != 1 || stores[0].Category != llm.CategoryContextOverflow || !strings.Contains(stores[0].Content, "round 0:") {
		t.Fatalf("hand-off %+v", stores)
	}
	if f.srv.Calls() != 1 {
		t.Fatalf("%d summary calls across two deliveries, want 1", f.srv.Calls())
	}
	if fmt.Sprint(fitted[0]) != fmt.Sprint(fitted[1]) {
		t.Fatal("the redelivery fitted the conversation differently")
	}
}

// Without a summary (the endpoint refuses) a note says what was left out.
func TestFitWithoutSummaryLeavesANote(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.MaxContextTokens, c.ReserveTokens = 2000, 300 })
	f.srv.Script(llmtest.Status(400))
	done := make(chan []schemas.LLMMessage, 1)
	f.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		out, _, err := f.client.Fit(ctx, d, llm.FitRequest{Key: "k", Messages: conversation(20)})
		if err != nil {
			t.Error(err)
		}
		done <- out
		return nil, nil
	}))
	f.send("go")
	out := <-done
	if !strings.Contains(out[2].Content, "were left out of this context") || !strings.Contains(out[2].Content, "store_request") {
		t.Fatalf("note %q", out[2].Content)
	}
}

func TestLedgerCountsEachCallOnce(t *testing.T) {
	l := llm.NewLedger()
	u := schemas.LLMUsage{CallID: "c1", Agent: "engineer", Model: "m", DAGID: "d", NodeID: "n", Usage: schemas.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	l.Add("S1", u)
	l.Add("S1", u)
	u.CallID, u.Agent, u.DAGID, u.NodeID = "c2", "architect", "", ""
	l.Add("S2", u)
	ctx := context.Background()
	for s, want := range map[llm.Scope]int64{{}: 30, {Session: "S1"}: 15, {Session: "S2"}: 15, {Session: "S1", DAGID: "d", NodeID: "n"}: 15, {Session: "S3"}: 0} {
		if got, _ := l.Spent(ctx, s); got != want {
			t.Errorf("%s: %d, want %d", s, got, want)
		}
	}
	r := l.Report("S1")
	if r.Total.TotalTokens != 15 || len(r.ByTask) != 1 || r.ByAgent["architect"].Calls != 1 || r.BySession["S2"].Calls != 0 {
		t.Fatalf("report %+v", r)
	}
}
