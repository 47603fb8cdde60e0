package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/cmd/sylk/internal/metrics"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func appendAll(t testing.TB, log *events.Log, envs ...*schemas.Envelope) {
	t.Helper()
	if _, err := log.AppendBatch(context.Background(), envs); err != nil {
		t.Fatal(err)
	}
}

func env(t testing.TB, typ schemas.Type, session, source string, payload any) *schemas.Envelope {
	t.Helper()
	e, err := schemas.New(typ, session, source, "user", time.Now(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestFold checks the counters folded from the stream: usage by model, tool
// runs by outcome, and breaker states that remember what came before the
// process started.
func TestFold(t *testing.T) {
	st := llmtest.NewStack(t) // the projector the metrics follow the stream through
	log := st.Log
	// Before the process: a breaker that opened and stays open.
	appendAll(t, log,
		env(t, schemas.TypeCircuitChange, schemas.SystemSession, "engineer", schemas.CircuitChange{Resource: "subprocess", From: "closed", To: "open"}),
		env(t, schemas.TypeToolResult, "S0", "engineer", schemas.ToolResult{CallID: "old", Tool: "exec", OK: true}),
	)

	m := metrics.New(st.JetStream(), nil)
	stop, err := m.Follow(st.Ctx, st.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	appendAll(t, log,
		env(t, schemas.TypeLLMUsage, "S1", "engineer", schemas.LLMUsage{CallID: "c1", Model: "m1", Usage: schemas.Usage{PromptTokens: 100, CompletionTokens: 20}, CostUSD: 0.5}),
		env(t, schemas.TypeLLMUsage, "S1", "tester", schemas.LLMUsage{CallID: "c2", Model: "m1", Usage: schemas.Usage{PromptTokens: 10, CompletionTokens: 2}, CostUSD: 0.25}),
		env(t, schemas.TypeToolResult, "S1", "engineer", schemas.ToolResult{CallID: "t1", Tool: "exec", OK: true, DurationMS: 40}),
		env(t, schemas.TypeToolResult, "S1", "engineer", schemas.ToolResult{CallID: "t2", Tool: "exec", TimedOut: true, DurationMS: 2000}),
		env(t, schemas.TypeCircuitChange, schemas.SystemSession, "tester", schemas.CircuitChange{Resource: "network", From: "closed", To: "half_open"}),
	)

	// Two runners of one agent kind in this process: their held messages add up.
	m.AddRunner(heldBy{"engineer", 2})
	m.AddRunner(heldBy{"engineer", 1})
	m.AddRunner(heldBy{"tester", 0})
	pool, err := tools.NewPool(6, 2)
	if err != nil {
		t.Fatal(err)
	}
	release, err := pool.Acquire(tools.ForUser(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	m.SetPool(pool)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	want := `
# HELP sylk_agent_held_messages Messages this process's agents hold unstarted because their session, or everything, is paused.
# TYPE sylk_agent_held_messages gauge
sylk_agent_held_messages{agent="engineer"} 3
sylk_agent_held_messages{agent="tester"} 0
# HELP sylk_tool_processes Tool processes running in this process's pool, by lane: the user's own requests, or other (scheduled, background) work.
# TYPE sylk_tool_processes gauge
sylk_tool_processes{lane="other"} 0
sylk_tool_processes{lane="user"} 1
# HELP sylk_tool_process_slots The tool process pool's limits: max (at once) and user_reserved (kept for the user's own requests).
# TYPE sylk_tool_process_slots gauge
sylk_tool_process_slots{limit="max"} 6
sylk_tool_process_slots{limit="user_reserved"} 2
# HELP sylk_llm_tokens_total LLM tokens, by model and kind (prompt, completion).
# TYPE sylk_llm_tokens_total counter
sylk_llm_tokens_total{kind="completion",model="m1"} 22
sylk_llm_tokens_total{kind="prompt",model="m1"} 110
# HELP sylk_llm_cost_usd_total LLM cost in US dollars, by model, as priced when the call was recorded.
# TYPE sylk_llm_cost_usd_total counter
sylk_llm_cost_usd_total{model="m1"} 0.75
# HELP sylk_llm_calls_total LLM calls that recorded their usage, by model.
# TYPE sylk_llm_calls_total counter
sylk_llm_calls_total{model="m1"} 2
# HELP sylk_tool_runs_total Tool runs that recorded a result, by tool and outcome (ok, failed, timed_out, canceled).
# TYPE sylk_tool_runs_total counter
sylk_tool_runs_total{outcome="ok",tool="exec"} 1
sylk_tool_runs_total{outcome="timed_out",tool="exec"} 1
# HELP sylk_circuit_breaker_state 1 for each agent's breaker's current state (closed, open, half_open) per resource, 0 for the others.
# TYPE sylk_circuit_breaker_state gauge
sylk_circuit_breaker_state{agent="engineer",resource="subprocess",state="closed"} 0
sylk_circuit_breaker_state{agent="engineer",resource="subprocess",state="half_open"} 0
sylk_circuit_breaker_state{agent="engineer",resource="subprocess",state="open"} 1
sylk_circuit_breaker_state{agent="tester",resource="network",state="closed"} 0
sylk_circuit_breaker_state{agent="tester",resource="network",state="half_open"} 1
sylk_circuit_breaker_state{agent="tester",resource="network",state="open"} 0
`
	names := []string{"sylk_agent_held_messages", "sylk_tool_processes", "sylk_tool_process_slots", "sylk_llm_tokens_total", "sylk_llm_cost_usd_total", "sylk_llm_calls_total", "sylk_tool_runs_total", "sylk_circuit_breaker_state"}
	var last error
	if !brokertest.Poll(10*time.Second, func() bool {
		last = testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), names...)
		return last == nil
	}) {
		t.Fatal(last)
	}
	// The events counted are those appended since Follow: not the old ones.
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(`
# HELP sylk_events_appended_total Events the stream received while this process ran, by type.
# TYPE sylk_events_appended_total counter
sylk_events_appended_total{type="circuit_change"} 1
sylk_events_appended_total{type="llm_usage"} 2
sylk_events_appended_total{type="tool_result"} 2
`), "sylk_events_appended_total"); err != nil {
		t.Error(err)
	}
}

// heldBy is a runner's count of held messages.
type heldBy struct {
	agent string
	held  int
}

func (h heldBy) Agent() string { return h.agent }
func (h heldBy) Held() int     { return h.held }

// BenchmarkScrape scrapes a server whose stream holds 10,000 sessions (the
// issue's budget: under 50 ms a scrape).
func BenchmarkScrape(b *testing.B) {
	br := brokertest.Start(b, brokertest.Options(b))
	log := events.New(br.JetStream())
	const sessions = 10_000
	batch := make([]*schemas.Envelope, 0, 500)
	for i := range sessions {
		batch = append(batch, env(b, schemas.TypeUserInput, fmt.Sprintf("S%05d", i), "user", schemas.UserInput{Text: "hello"}))
		if len(batch) == cap(batch) {
			appendAll(b, log, batch...)
			batch = batch[:0]
		}
	}
	m := metrics.New(br.JetStream(), nil)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/scrape")
}
