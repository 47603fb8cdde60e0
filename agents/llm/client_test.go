package llm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a stack, a fake endpoint and a client over both.
type fixture struct {
	*llmtest.Stack
	t      *testing.T
	srv    *llmtest.Server
	client *llm.Client
	ledger *llm.Ledger
}

func newFixture(t *testing.T, mutate func(*llm.Config, *llm.Deps)) *fixture {
	t.Helper()
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	cfg := llm.Config{BaseURL: srv.URL(), Model: "fake-model", APIKey: "sk-test", NoStream: true,
		Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Timeout: 5 * time.Second}
	ledger := llm.NewLedger()
	deps := llm.Deps{Records: st.Store, Usage: ledger}
	if mutate != nil {
		mutate(&cfg, &deps)
	}
	c, err := llm.NewClient(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fixture{Stack: st, t: t, srv: srv, client: c, ledger: ledger}
}

// result is what one Complete returned.
type result struct {
	resp    schemas.LLMResponse
	reused  bool
	err     error
	attempt int
}

// results collects what a handler's calls returned.
type results struct {
	mu  sync.Mutex
	all []result
}

func (r *results) add(x result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, x)
}

func (r *results) get() []result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]result(nil), r.all...)
}

// engineer runs a handler for "engineer" that makes the calls reqs gives for
// each user_input, recording each result; crash makes the first delivery fail
// after its calls, before its ack.
func (f *fixture) engineer(reqs func(d *agents.Delivery) []llm.Request, crash bool) *results {
	res := &results{}
	f.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		for _, req := range reqs(d) {
			resp, reused, err := f.client.Complete(ctx, d, req)
			res.add(result{resp, reused, err, d.Attempt})
			if err != nil {
				if class, _ := agents.Classify(ctx, err); class == agents.ClassPermanent {
					return nil, nil
				}
				return nil, err
			}
		}
		if crash && d.Attempt == 1 {
			return nil, agents.Transient(errors.New("crash before the ack"), time.Millisecond)
		}
		return nil, nil
	}))
	return res
}

func one(req llm.Request) func(*agents.Delivery) []llm.Request {
	return func(*agents.Delivery) []llm.Request { return []llm.Request{req} }
}

func (f *fixture) send(text string) *schemas.Envelope {
	return f.Send("S1", "user", "engineer", schemas.TypeUserInput, schemas.UserInput{Text: text})
}

func (f *fixture) waitIdle(res *results, n int) []result {
	f.t.Helper()
	f.Eventually(20*time.Second, "calls made and the message acked", func() bool { return len(res.get()) >= n && f.Idle("engineer") })
	return res.get()
}

func msgs(text string) []schemas.LLMMessage {
	return []schemas.LLMMessage{{Role: "system", Content: "You are a test."}, {Role: "user", Content: text}}
}

func TestCompleteRecordsRequestResponseAndUsage(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Text("the answer").WithUsage(120, 30))
	spec := tools.ToolSpec{Name: "read_file", Description: "read", Parameters: []byte(`{"type":"object"}`)}
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("question"), Tools: []tools.ToolSpec{spec}, JSON: true, DAGID: "d1", NodeID: "n1"}), false)
	f.send("go")
	got := f.waitIdle(res, 1)[0]
	if got.err != nil || got.reused || got.resp.Content != "the answer" || got.resp.Usage.TotalTokens != 150 {
		t.Fatalf("result %+v", got)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 1 || reqs[0].Model != "fake-model" || reqs[0].Auth != "Bearer sk-test" || reqs[0].ResponseFormat == nil ||
		strings.Join(reqs[0].ToolNames(), ",") != "read_file" || reqs[0].Last() != "question" {
		t.Fatalf("the endpoint got %+v", reqs)
	}
	lreq := llmtest.Payloads[schemas.LLMRequest](f.Stack, schemas.TypeLLMRequest)
	lresp := llmtest.Payloads[schemas.LLMResponse](f.Stack, schemas.TypeLLMResponse)
	usage := llmtest.Payloads[schemas.LLMUsage](f.Stack, schemas.TypeLLMUsage)
	if len(lreq) != 1 || len(lresp) != 1 || len(usage) != 1 {
		t.Fatalf("%d requests, %d responses, %d usages recorded", len(lreq), len(lresp), len(usage))
	}
	if r := lreq[0]; r.CallID != got.resp.CallID || !r.BudgetChecked || r.MessagesDigest == "" || len(r.Messages) != 2 || r.Tools[0] != "read_file" || r.Agent != "engineer" {
		t.Fatalf("llm_request %+v", r)
	}
	if u := usage[0]; u.Usage.TotalTokens != 150 || u.Agent != "engineer" || u.DAGID != "d1" || u.NodeID != "n1" || u.Model != "fake-model" {
		t.Fatalf("llm_usage %+v", u)
	}
	if spent, _ := f.ledger.Spent(f.Ctx, llm.Scope{Session: "S1", DAGID: "d1", NodeID: "n1"}); spent != 150 {
		t.Fatalf("the ledger counts %d tokens for the task, want 150", spent)
	}
	// The request is recorded before the response.
	all := f.Events("")
	var order []schemas.Type
	for _, e := range all {
		if e.Type == schemas.TypeLLMRequest || e.Type == schemas.TypeLLMResponse {
			order = append(order, e.Type)
		}
	}
	if len(order) != 2 || order[0] != schemas.TypeLLMRequest {
		t.Fatalf("event order %v", order)
	}
}

// A redelivered message reuses the recorded response: one call, one cost.
func TestRedeliveryReusesRecordedResponses(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Text("first"), llmtest.Text("second"))
	res := f.engineer(func(*agents.Delivery) []llm.Request {
		return []llm.Request{{Key: "a", Messages: msgs("a")}, {Key: "b", Messages: msgs("b")}}
	}, true)
	f.send("go")
	got := f.waitIdle(res, 4)
	if len(got) != 4 {
		t.Fatalf("%d results", len(got))
	}
	if got[0].reused || got[1].reused || !got[2].reused || !got[3].reused || got[2].attempt != 2 {
		t.Fatalf("reuse on redelivery: %+v", got)
	}
	if got[2].resp.Content != "first" || got[3].resp.Content != "second" {
		t.Fatalf("reused contents %q %q", got[2].resp.Content, got[3].resp.Content)
	}
	if n := f.srv.Calls(); n != 2 {
		t.Fatalf("the endpoint was called %d times, want 2", n)
	}
	if n := f.Count(schemas.TypeLLMUsage); n != 2 {
		t.Fatalf("%d usage records, want 2", n)
	}
}

// A budget that the estimate would exceed refuses before any call or record.
func TestBudgetRefusesBeforeCalling(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.Budgets.Task = 50 })
	res := f.engineer(one(llm.Request{Key: "big", Messages: msgs(strings.Repeat("long context ", 100)), DAGID: "d1", NodeID: "n1"}), false)
	f.send("go")
	got := f.waitIdle(res, 1)[0]
	if !errors.Is(got.err, llm.ErrTaskBudgetExceeded) || !errors.Is(got.err, llm.ErrBudgetExceeded) {
		t.Fatalf("error %v, want a task budget refusal", got.err)
	}
	if class, _ := agents.Classify(context.Background(), got.err); class != agents.ClassPermanent {
		t.Fatalf("a budget refusal is %v, want permanent", class)
	}
	if f.srv.Calls() != 0 || f.Count(schemas.TypeLLMRequest) != 0 {
		t.Fatalf("refused call reached the endpoint (%d) or the log (%d requests)", f.srv.Calls(), f.Count(schemas.TypeLLMRequest))
	}
}

// Spent tokens count against the session budget: the second call is refused.
func TestSessionBudgetCountsSpentTokens(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.Budgets.Session = 550 })
	f.srv.Script(llmtest.Text("ok").WithUsage(400, 100))
	res := f.engineer(func(*agents.Delivery) []llm.Request {
		return []llm.Request{{Key: "1", Messages: msgs("one"), MaxTokens: 100}, {Key: "2", Messages: msgs("two"), MaxTokens: 100}}
	}, false)
	f.send("go")
	got := f.waitIdle(res, 2)
	if got[0].err != nil || !errors.Is(got[1].err, llm.ErrSessionBudgetExceeded) {
		t.Fatalf("results %+v", got)
	}
	if f.srv.Calls() != 1 {
		t.Fatalf("%d calls, want 1", f.srv.Calls())
	}
}

// A 429 pauses everything until its Retry-After, with signal events, then the
// call is retried and answered.
func TestRateLimitPausesAndResumes(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Status(429).WithRetryAfter("1"), llmtest.Text("after the pause"))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	start := time.Now()
	f.send("go")
	got := f.waitIdle(res, 1)[0]
	if got.err != nil || got.resp.Content != "after the pause" {
		t.Fatalf("result %+v", got)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("retried after %s, before the Retry-After of 1s", waited)
	}
	f.Eventually(5*time.Second, "pause and resume signals", func() bool { return f.Count(schemas.TypeSignal) == 2 })
	sigs := f.Events(schemas.TypeSignal)
	p0, _ := schemas.PayloadAs[schemas.Signal](sigs[0])
	p1, _ := schemas.PayloadAs[schemas.Signal](sigs[1])
	if p0.Action != schemas.SignalPause || p0.Scope != schemas.ScopeAll || p0.ResumeAt.Before(start.Add(900*time.Millisecond)) ||
		p1.Action != schemas.SignalResume || p1.Scope != schemas.ScopeAll || sigs[0].Metadata[llm.MetaRateLimit] == "" {
		t.Fatalf("signals %+v %+v", p0, p1)
	}
	if f.srv.Calls() != 2 {
		t.Fatalf("%d calls, want 2", f.srv.Calls())
	}
}

// The end of a rate-limit pause leaves a session the user paused paused.
func TestRateLimitResumeKeepsUserPauses(t *testing.T) {
	f := newFixture(t, nil)
	f.Send("S9", "user", "orchestrator", schemas.TypeSignal, schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeSession})
	f.srv.Script(llmtest.Status(429).WithRetryAfter("0.2"), llmtest.Text("ok"))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	f.send("go")
	f.waitIdle(res, 1)
	f.Eventually(5*time.Second, "pause, resume and the user's pause again", func() bool { return f.Count(schemas.TypeSignal) == 4 })
	last := f.Events(schemas.TypeSignal)[3]
	p, _ := schemas.PayloadAs[schemas.Signal](last)
	if last.SessionID != "S9" || p.Action != schemas.SignalPause || p.Scope != schemas.ScopeSession {
		t.Fatalf("last signal %s %+v, want S9 paused again", last.SessionID, p)
	}
}

// A global pause the user made is not taken over: no pause, no resume.
func TestRateLimitDoesNotTakeOverAUserPause(t *testing.T) {
	f := newFixture(t, nil)
	f.Send(schemas.SystemSession, "user", "orchestrator", schemas.TypeSignal, schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeAll})
	f.srv.Script(llmtest.Status(429).WithRetryAfter("0.1"), llmtest.Text("ok"))
	var done atomic.Bool
	f.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		_, _, err := f.client.Complete(ctx, d, llm.Request{Key: "q", Messages: msgs("q")})
		done.Store(err == nil)
		return nil, err
	}), func(o *agents.Options) {
		o.Filters = []string{events.Filter{Target: "engineer", Type: schemas.TypeSignal}.Subject()}
	})
	// A signal is never held: the handler runs although everything is paused.
	f.Send(schemas.SystemSession, "user", "engineer", schemas.TypeSignal, schemas.Signal{Action: schemas.SignalCancel, Scope: schemas.ScopeSession})
	f.Eventually(10*time.Second, "the call answered", done.Load)
	if n := f.Count(schemas.TypeSignal); n != 2 {
		t.Fatalf("%d signals, want the user's pause and the trigger only", n)
	}
}

func TestTransientFailuresAreRetried(t *testing.T) {
	for name, first := range map[string]llmtest.Reply{
		"500":       llmtest.Status(500),
		"malformed": llmtest.Malformed(),
		"hanging":   llmtest.Hanging(),
		"empty":     {Raw: `{"id":"x","object":"chat.completion","choices":[]}`},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.Timeout = 300 * time.Millisecond })
			f.srv.Script(first, llmtest.Text("recovered"))
			res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
			f.send("go")
			got := f.waitIdle(res, 1)[0]
			if got.err != nil || got.resp.Content != "recovered" || f.srv.Calls() != 2 {
				t.Fatalf("result %+v after %d calls", got, f.srv.Calls())
			}
		})
	}
}

// When the retries run out the error is transient: the runner redelivers,
// and the redelivery makes the call again (it was never answered).
func TestExhaustedRetriesAreTransient(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.Retries = 1 })
	f.srv.Script(llmtest.Status(503), llmtest.Status(503), llmtest.Text("third time"))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	f.send("go")
	got := f.waitIdle(res, 2)
	if class, _ := agents.Classify(context.Background(), got[0].err); class != agents.ClassTransient {
		t.Fatalf("first delivery: %v (%v), want transient", got[0].err, class)
	}
	if got[1].err != nil || got[1].resp.Content != "third time" || got[1].attempt != 2 {
		t.Fatalf("redelivery: %+v", got[1])
	}
	// The first delivery's request shows the cut-off attempt.
	if n := f.Count(schemas.TypeLLMRequest); n != 2 {
		t.Fatalf("%d llm_request events, want one per delivery", n)
	}
}

// A refusal is recorded and reused: the redelivery does not ask again.
func TestRefusalIsRecordedAndNotRetried(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Status(400))
	res := &results{}
	var deliveries atomic.Int32
	f.Run("engineer", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		resp, reused, err := f.client.Complete(ctx, d, llm.Request{Key: "q", Messages: msgs("q")})
		res.add(result{resp, reused, err, d.Attempt})
		if deliveries.Add(1) == 1 {
			return nil, agents.Transient(errors.New("crash"), time.Millisecond)
		}
		return nil, nil
	}))
	f.send("go")
	got := f.waitIdle(res, 2)
	for i, g := range got {
		if !errors.Is(g.err, llm.ErrRefused) {
			t.Fatalf("delivery %d: %v, want a refusal", i+1, g.err)
		}
	}
	if !got[1].reused || f.srv.Calls() != 1 || f.Count(schemas.TypeLLMUsage) != 0 {
		t.Fatalf("reused=%v calls=%d usage=%d", got[1].reused, f.srv.Calls(), f.Count(schemas.TypeLLMUsage))
	}
}

// Streamed answers are accumulated (tool-call arguments arrive in pieces) and
// their pieces published live on the correlation's subject.
func TestStreamingPublishesLiveChunks(t *testing.T) {
	var live *nats.Conn
	f := newFixture(t, func(c *llm.Config, d *llm.Deps) { c.NoStream = false })
	live = f.Broker.Conn()
	c, err := llm.NewClient(llm.Config{BaseURL: f.srv.URL(), Model: "m", Timeout: 5 * time.Second}, llm.Deps{Records: f.Store, Live: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.client = c
	sub, err := live.SubscribeSync(events.LivePrefix + ".S1.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	f.srv.Script(llmtest.Reply{Content: "hello streaming world", Chunks: 3, ToolCalls: []llmtest.ToolCall{
		llmtest.Call("c1", "read_file", `{"path":"a.go"}`), llmtest.Call("c2", "grep", `{"pattern":"x"}`),
	}})
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	in := f.send("go")
	got := f.waitIdle(res, 1)[0]
	if got.err != nil || got.resp.Content != "hello streaming world" || len(got.resp.ToolCalls) != 2 ||
		got.resp.ToolCalls[0].Arguments != `{"path":"a.go"}` || got.resp.ToolCalls[1].Name != "grep" || got.resp.Usage.TotalTokens == 0 {
		t.Fatalf("streamed result %+v", got)
	}
	if !f.srv.Requests()[0].Stream {
		t.Fatal("the request was not streamed")
	}
	var text strings.Builder
	kinds := map[string]int{}
	for {
		m, err := sub.NextMsg(2 * time.Second)
		if err != nil {
			t.Fatalf("live chunks: %v (got %v)", err, kinds)
		}
		if m.Subject != events.LiveSubject("S1", in.CorrelationID) {
			t.Fatalf("chunk on %s", m.Subject)
		}
		env, err := schemas.Unmarshal(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := schemas.PayloadAs[schemas.StreamChunk](env)
		kinds[ch.Kind]++
		if ch.Kind == "text" {
			text.WriteString(ch.Text)
		}
		if ch.Kind == "end" {
			break
		}
	}
	if text.String() != "hello streaming world" || kinds["tool_start"] != 2 || kinds["text"] != 3 {
		t.Fatalf("live text %q, kinds %v", text.String(), kinds)
	}
	if f.Count(schemas.TypeStreamChunk) != 0 {
		t.Fatal("stream chunks were stored")
	}
}

// A stream that goes silent is cut off by the watchdog and retried.
func TestStalledStreamIsRetried(t *testing.T) {
	f := newFixture(t, func(c *llm.Config, _ *llm.Deps) { c.NoStream, c.IdleTimeout = false, 200*time.Millisecond })
	f.srv.Script(llmtest.Stalling("partial answer that never ends"), llmtest.Text("whole"))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	f.send("go")
	got := f.waitIdle(res, 1)[0]
	if got.err != nil || got.resp.Content != "whole" || f.srv.Calls() != 2 {
		t.Fatalf("result %+v after %d calls", got, f.srv.Calls())
	}
}

// Secrets in the conversation are redacted before they are sent or recorded.
func TestMessagesAreRedacted(t *testing.T) {
	red, err := tools.NewRedactor(tools.SecretOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(_ *llm.Config, d *llm.Deps) { d.Redactor = red })
	f.srv.Script(llmtest.Text("ok"))
	const secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("the token is " + secret)}), false)
	f.send("go")
	f.waitIdle(res, 1)
	if last := f.srv.Requests()[0].Last(); strings.Contains(last, secret) || !strings.Contains(last, "[REDACTED]") {
		t.Fatalf("sent %q", last)
	}
	for _, e := range f.Events(schemas.TypeLLMRequest) {
		p, _ := schemas.PayloadAs[schemas.LLMRequest](e)
		for _, m := range p.Messages {
			if strings.Contains(m.Content, secret) {
				t.Fatal("the secret was recorded")
			}
		}
	}
}

// A followed ledger counts the usage already in the log, then new usage.
func TestLedgerFollowsTheLog(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Script(llmtest.Text("a").WithUsage(10, 5), llmtest.Text("b").WithUsage(20, 5))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	f.send("one")
	f.waitIdle(res, 1)
	l := llm.NewLedger()
	stop, err := l.Follow(f.Ctx, f.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if spent, _ := l.Spent(f.Ctx, llm.Scope{}); spent != 15 {
		t.Fatalf("caught up to %d tokens, want 15", spent)
	}
	f.send("two")
	f.Eventually(10*time.Second, "the second call followed", func() bool { spent, _ := l.Spent(f.Ctx, llm.Scope{Session: "S1"}); return spent == 40 })
}

// A pause left by a process that stopped before its resume is ended by the
// next one.
func TestResumeStalePause(t *testing.T) {
	f := newFixture(t, nil)
	env, err := schemas.New(schemas.TypeSignal, schemas.SystemSession, "engineer", "orchestrator", time.Now(),
		schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeAll, Reason: "rate limited", ResumeAt: time.Now().Add(-time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	env.Metadata = map[string]string{llm.MetaRateLimit: "openai"}
	if _, err := f.Log.Append(f.Ctx, env); err != nil {
		t.Fatal(err)
	}
	if err := f.client.ResumeStalePause(f.Ctx, f.Log); err != nil {
		t.Fatal(err)
	}
	sigs := f.Events(schemas.TypeSignal)
	if len(sigs) != 2 {
		t.Fatalf("%d signals, want the pause and its resume", len(sigs))
	}
	if p, _ := schemas.PayloadAs[schemas.Signal](sigs[1]); p.Action != schemas.SignalResume || p.Scope != schemas.ScopeAll || sigs[1].ParentID != env.ID {
		t.Fatalf("resume %+v", p)
	}
	// A user's pause is not the client's to end.
	f.Send(schemas.SystemSession, "user", "orchestrator", schemas.TypeSignal, schemas.Signal{Action: schemas.SignalPause, Scope: schemas.ScopeAll})
	if err := f.client.ResumeStalePause(f.Ctx, f.Log); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(schemas.TypeSignal); n != 3 {
		t.Fatalf("%d signals: the user's pause was resumed", n)
	}
}

// Reconfigure changes the model and the budgets of the calls that follow;
// the endpoint stays the one the client was made with, and an invalid
// configuration changes nothing.
func TestReconfigureTakesLiveSettings(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if err := f.client.CheckBudget(ctx, "S1", "", "", 1000); err != nil {
		t.Fatalf("no budget yet: %v", err)
	}
	next := f.client.Config()
	next.Model, next.BaseURL, next.Budgets.Session = "other-model", "http://127.0.0.1:1/v1", 500
	if err := f.client.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CheckBudget(ctx, "S1", "", "", 1000); !errors.Is(err, llm.ErrSessionBudgetExceeded) {
		t.Fatalf("after the session budget went to 500, a 1000-token call: %v", err)
	}
	got := f.client.Config()
	if got.Model != "other-model" || got.BaseURL != f.srv.URL() {
		t.Fatalf("model %q base URL %q: want the new model on the old endpoint", got.Model, got.BaseURL)
	}
	bad := got
	bad.MaxContextTokens, bad.ReserveTokens = 100, 200
	if err := f.client.Reconfigure(bad); err == nil {
		t.Fatal("a reserve larger than the context window was taken")
	}
	if f.client.Config().ReserveTokens == 200 {
		t.Fatal("an invalid configuration changed the client")
	}
	f.srv.Script(llmtest.Text("ok"))
	res := f.engineer(one(llm.Request{Key: "q", Messages: msgs("q")}), false)
	f.send("go")
	if r := f.waitIdle(res, 1)[0]; r.err != nil {
		t.Fatal(r.err)
	}
	if reqs := f.srv.Requests(); reqs[0].Model != "other-model" {
		t.Fatalf("the call used model %q", reqs[0].Model)
	}
}
