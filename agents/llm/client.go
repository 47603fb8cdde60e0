package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Errors of calls.
var (
	// ErrRefused: the endpoint refused the call for good (a 4xx other than
	// 408, 409 and 429: a bad key, an unknown model, a request too long). The
	// refusal is recorded like an answer, so a redelivery does not ask again.
	ErrRefused = errors.New("the LLM endpoint refused the call")
	// ErrClosed: the client is closed.
	ErrClosed = errors.New("llm client closed")
	// ErrNoKey: a request without a key cannot be found again on redelivery.
	ErrNoKey = errors.New("llm request without a key")
)

// Records finds a call's recorded response: *projections.Store. Not recorded
// is an error wrapping projections.ErrNotFound.
type Records interface {
	LLMResponse(ctx context.Context, callID string) (*schemas.LLMResponse, uint64, error)
}

// Recording answers a call from a recorded session. Answer gets the request
// as it would be recorded, with every message (not only the ones a
// conversation's earlier call recorded), and returns the recorded response:
// nothing is recorded for it and nothing is sent. An error wrapping
// projections.ErrNotFound makes the call for real (a re-execution going
// live); any other error is the call's.
type Recording interface {
	Answer(ctx context.Context, d *agents.Delivery, req schemas.LLMRequest) (*schemas.LLMResponse, error)
}

// Publisher publishes live token chunks on core NATS: *nats.Conn.
type Publisher interface {
	Publish(subject string, data []byte) error
}

// Redactor cleans text before it is sent to the endpoint or recorded:
// *tools.Redactor (tools.Executor.Redactor()).
type Redactor interface {
	Redact(s string) string
}

// Deps are what a Client works with besides its Config.
type Deps struct {
	// Records finds recorded responses (required): *projections.Store.
	Records Records
	// Usage says what was spent, for the budgets. Nil uses a Ledger of this
	// client's own calls only: give a followed Ledger or a usage projection
	// so budgets count every process and survive restarts.
	Usage Usage
	// Live receives streamed token chunks (nil: none are published).
	Live Publisher
	// Redactor cleans every message before it is sent and recorded (nil:
	// none).
	Redactor Redactor
	// HTTPClient makes the calls (default: a plain http.Client; Config
	// bounds each attempt).
	HTTPClient *http.Client
	// Recording answers calls from a recorded session instead of the
	// endpoint (a re-execution): nil for none.
	Recording Recording
	Logger    *slog.Logger
	Now       func() time.Time
}

// Client makes LLM calls for agents through the gate: budget check, priority
// queue, rate-limit pause, retries per error class, and it records every call
// as events so a redelivery reuses the answer (see Complete). It is safe for
// concurrent use; one per process.
type Client struct {
	cfg      atomic.Pointer[Config] // replaced by Reconfigure
	records  Records
	replay   Recording
	usage    Usage
	recorder UsageRecorder
	live     Publisher
	red      Redactor
	log      *slog.Logger
	now      func() time.Time

	prov   *provider
	gate   *gate
	budget *budget
	pauses *pauser
}

// NewClient applies defaults to cfg, validates it and returns a client.
func NewClient(cfg Config, deps Deps) (*Client, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Records == nil {
		return nil, fmt.Errorf("%w: Deps.Records is required (the projections store)", ErrInvalidConfig)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Usage == nil {
		deps.Usage = NewLedger()
	}
	c := &Client{
		records: deps.Records, replay: deps.Recording, usage: deps.Usage, live: deps.Live, red: deps.Redactor,
		log: deps.Logger, now: deps.Now,
		prov:   newProvider(&cfg, deps.HTTPClient, deps.Now),
		gate:   newGate(cfg.Concurrency, deps.Now),
		budget: newBudget(cfg.Budgets, deps.Usage),
	}
	c.cfg.Store(&cfg)
	c.recorder, _ = deps.Usage.(UsageRecorder)
	c.pauses = &pauser{c: c}
	return c, nil
}

// Config is the client's configuration, defaults applied.
func (c *Client) Config() Config { return *c.cfg.Load() }

// conf is the configuration calls are made with now.
func (c *Client) conf() *Config { return c.cfg.Load() }

// LiveKeys are the configuration keys (under llm.) Reconfigure takes while
// the client runs; the others (the endpoint, its key and provider, the
// timeouts, the concurrency and the embeddings) are fixed when it is made.
var LiveKeys = []string{
	"model", "agent_models", "budgets", "prices", "max_context_tokens", "reserve_tokens", "max_tokens", "no_stream",
	"retries", "rate_limit_retries", "backoff", "max_backoff", "rate_limit_backoff", "max_rate_limit_backoff",
}

// Reconfigure takes next's LiveKeys for the calls that start from now on;
// calls in flight finish with the configuration they began with. next is
// checked first and, if invalid, nothing changes.
func (c *Client) Reconfigure(next Config) error {
	next.EnsureDefaults()
	if err := next.Validate(); err != nil {
		return err
	}
	cur := *c.conf()
	cur.Model, cur.AgentModels, cur.Budgets, cur.Prices = next.Model, next.AgentModels, next.Budgets, next.Prices
	cur.MaxContextTokens, cur.ReserveTokens, cur.MaxTokens, cur.NoStream = next.MaxContextTokens, next.ReserveTokens, next.MaxTokens, next.NoStream
	cur.Retries, cur.RateLimitRetries, cur.Backoff, cur.MaxBackoff = next.Retries, next.RateLimitRetries, next.Backoff, next.MaxBackoff
	cur.RateLimitBackoff, cur.MaxRateLimitBackoff = next.RateLimitBackoff, next.MaxRateLimitBackoff
	c.budget.limits.Store(&cur.Budgets)
	c.cfg.Store(&cur)
	return nil
}

// Close ends a rate-limit pause this client started (appending its resume)
// and stops its timers. Calls still waiting keep waiting for their contexts.
func (c *Client) Close() error {
	c.gate.close()
	return c.pauses.close()
}

// Request is one call.
type Request struct {
	// Key names the call among those of one delivery ("plan/1",
	// "node/step/3"): the same key on a redelivery finds the recorded
	// response. Required.
	Key string
	// Messages is the conversation. Seen is how many leading messages an
	// earlier call of the same conversation recorded already: only the rest
	// go into this call's llm_request event (the digest covers them all).
	Messages []schemas.LLMMessage
	Seen     int
	// Tools are offered for tool calling.
	Tools []tools.ToolSpec
	// JSON asks for a JSON object as the answer.
	JSON bool
	// MaxTokens caps the answer (0: Config.MaxTokens).
	MaxTokens int
	// Model overrides the agent's model.
	Model string
	// Priority in the queue (0: PriorityOf the agent).
	Priority schemas.Priority
	// DAGID and NodeID attribute the call to a task, for its budget and usage.
	DAGID, NodeID string
}

// estimatedAnswer is what an answer is assumed to cost when the request does
// not cap it.
const estimatedAnswer = 256

// CallID is the deterministic id of the call named key within the handling of
// d's message: the same on every delivery.
func CallID(d *agents.Delivery, key string) string {
	return tools.CallID(d.Env.ID, d.Agent, "llm", key)
}

// Complete makes one call, once across all deliveries of d's message.
//
// If the call's response is recorded, it is returned with reused=true and
// nothing else happens: no budget, no request, no cost (a refusal recorded
// earlier is returned again with its error). Otherwise Complete checks the
// budgets (a call that would exceed one is refused before anything is
// recorded: an error wrapping ErrBudgetExceeded, permanent), appends an
// llm_request event, waits its turn in the gate, calls the endpoint (streaming
// token chunks to the live subject of the correlation), retries per error
// class, and appends the llm_response and llm_usage events before it returns.
//
// Errors are classified for the runner: a refusal (ErrRefused) and an
// exceeded budget are permanent, an endpoint still failing after the retries
// is transient (the redelivery reuses every call recorded before), and a
// cancelled ctx is returned as is. Only a call cut off before its response
// was recorded is made again; its llm_request shows the attempt.
func (c *Client) Complete(ctx context.Context, d *agents.Delivery, req Request) (resp schemas.LLMResponse, reused bool, err error) {
	if req.Key == "" {
		return resp, false, agents.Permanent(ErrNoKey)
	}
	callID := CallID(d, req.Key)
	rec, _, err := c.records.LLMResponse(ctx, callID)
	switch {
	case err == nil:
		if rec.Error != "" {
			return *rec, true, agents.Permanent(fmt.Errorf("%w: %s", ErrRefused, rec.Error))
		}
		return *rec, true, nil
	case !errors.Is(err, projections.ErrNotFound):
		return resp, false, agents.Transient(fmt.Errorf("look up the recorded response of LLM call %s: %w", callID, err), 0)
	}

	model := req.Model
	if model == "" {
		model = c.conf().ModelFor(d.Agent)
	}
	msgs := c.redactAll(req.Messages)
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = c.conf().MaxTokens
	}
	answer := estimatedAnswer
	if maxTokens > 0 {
		answer = maxTokens
	}
	estimate := EstimateTokens(msgs, req.Tools) + answer
	names := make([]string, len(req.Tools))
	for i, t := range req.Tools {
		names[i] = t.Name
	}
	request := schemas.LLMRequest{
		CallID: callID, Agent: d.Agent, Model: model, MessagesDigest: digest(msgs, names), Messages: msgs, Tools: names,
		EstimatedTokens: estimate, BudgetChecked: true, DAGID: req.DAGID, NodeID: req.NodeID,
	}
	if c.replay != nil {
		ans, err := c.replay.Answer(ctx, d, request)
		switch {
		case err == nil && ans.Error != "":
			return *ans, true, agents.Permanent(fmt.Errorf("%w: %s", ErrRefused, ans.Error))
		case err == nil:
			return *ans, true, nil
		case !errors.Is(err, projections.ErrNotFound):
			return resp, false, err
		}
	}
	session := d.Env.SessionID
	releaseBudget, err := c.budget.reserve(ctx, session, req.DAGID, req.NodeID, int64(estimate))
	if err != nil {
		if errors.Is(err, ErrBudgetExceeded) {
			return resp, false, agents.Permanent(err)
		}
		return resp, false, agents.Transient(err, 0)
	}
	defer releaseBudget()

	seen := min(max(req.Seen, 0), len(msgs))
	request.Messages = msgs[seen:]
	started, err := d.Derive(schemas.TypeLLMRequest, "user", fmt.Sprintf("llm_request/%s/%d", callID, d.Attempt), request)
	if err != nil {
		return resp, false, agents.Permanent(err)
	}
	if _, err := d.AppendNow(ctx, started); err != nil {
		return resp, false, err
	}

	prio := req.Priority
	if prio == 0 {
		prio = PriorityOf(d.Agent)
	}
	start := c.now()
	out, err := c.attempts(ctx, d, callID, c.prov.request(model, msgs, req.Tools, req.JSON, maxTokens), prio)
	if err != nil {
		return resp, false, err
	}
	resp = out.resp
	resp.CallID, resp.LatencyMS = callID, c.now().Sub(start).Milliseconds()
	if resp.Model == "" {
		resp.Model = model
	}
	if out.class == classPermanent {
		resp.Error = c.redact(out.err.Error())
		if err := c.record(ctx, d, callID, resp, nil); err != nil {
			return resp, false, err
		}
		return resp, false, agents.Permanent(fmt.Errorf("%w: %s", ErrRefused, resp.Error))
	}
	if !out.usageKnown {
		// The endpoint reported no usage (some local servers): estimate it,
		// so budgets still count the call.
		completion := EstimateTokens([]schemas.LLMMessage{{Content: resp.Content, ToolCalls: resp.ToolCalls}}, nil)
		resp.Usage = schemas.Usage{PromptTokens: estimate - answer, CompletionTokens: completion, TotalTokens: estimate - answer + completion}
	}
	usage := schemas.LLMUsage{
		CallID: callID, Agent: d.Agent, Provider: c.conf().Provider, Model: resp.Model, DAGID: req.DAGID, NodeID: req.NodeID, Usage: resp.Usage,
		CostUSD: c.conf().cost(resp.Model, usageCounts{resp.Usage.PromptTokens, resp.Usage.CompletionTokens}),
	}
	if err := c.record(ctx, d, callID, resp, &usage); err != nil {
		return resp, false, err
	}
	if c.recorder != nil {
		c.recorder.Add(session, usage)
	}
	return resp, false, nil
}

// record appends the response, then the usage.
func (c *Client) record(ctx context.Context, d *agents.Delivery, callID string, resp schemas.LLMResponse, usage *schemas.LLMUsage) error {
	env, err := d.Derive(schemas.TypeLLMResponse, "user", "llm_response/"+callID, resp)
	if err != nil {
		return agents.Permanent(err)
	}
	envs := []*schemas.Envelope{env}
	if usage != nil {
		u, err := d.Derive(schemas.TypeLLMUsage, "user", "llm_usage/"+callID, *usage)
		if err != nil {
			return agents.Permanent(err)
		}
		envs = append(envs, u)
	}
	// Pipelined, not atomic: a crash in between can lose a call's usage
	// record, never its response, which comes first. (An atomic batch of
	// two costs milliseconds here, two pipelined appends tens of
	// microseconds.)
	if _, err := d.Log().AppendPipelined(ctx, envs); err != nil {
		return agents.Transient(fmt.Errorf("record LLM call %s: %w", callID, err), 0)
	}
	return nil
}

// appendAll appends envs atomically; if some are in the stream already (an
// earlier delivery), each is appended alone and the known ones are no-ops.
func appendAll(ctx context.Context, log *events.Log, envs []*schemas.Envelope) error {
	if len(envs) == 1 {
		_, err := log.Append(ctx, envs[0])
		return err
	}
	_, err := log.AppendBatch(ctx, envs)
	if errors.Is(err, events.ErrDuplicate) {
		for _, e := range envs {
			if _, err := log.Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	}
	return err
}

// attempts calls until an answer, a permanent refusal, or the retries run out.
func (c *Client) attempts(ctx context.Context, d *agents.Delivery, callID string, req ireq, prio schemas.Priority) (outcome, error) {
	stream := !c.conf().NoStream
	live := c.chunks(d, callID)
	var transient, limited int
	for {
		release, err := c.gate.acquire(ctx, prio)
		if err != nil {
			return outcome{}, err
		}
		br := d.Breaker("llm")
		if wait, err := br.Allow(); err != nil {
			release()
			return outcome{}, agents.Transient(err, wait)
		}
		out := c.prov.call(ctx, req, stream, live.piece)
		release()
		if out.err == nil {
			br.Record(false)
			live.end(out.resp.FinishReason)
			return out, nil
		}
		if ctx.Err() != nil {
			br.Record(false)
			return outcome{}, ctx.Err()
		}
		live.fail(out.err)
		switch out.class {
		case classPermanent:
			br.Record(false)
			return out, nil
		case classRateLimited:
			br.Record(false)
			limited++
			wait := out.retryAfter
			if !out.hasRetryAfter {
				wait = doubling(c.conf().RateLimitBackoff, c.conf().MaxRateLimitBackoff, limited)
			}
			if limited > c.conf().RateLimitRetries {
				return outcome{}, agents.Transient(fmt.Errorf("llm: still rate limited after %d retries: %w", c.conf().RateLimitRetries, out.err), wait)
			}
			c.log.Warn("llm rate limited", "agent", d.Agent, "call", callID, "attempt", limited, "wait", wait, "retry_after_given", out.hasRetryAfter)
			c.pauses.begin(ctx, d, fmt.Sprintf("%s/%d/%d", callID, d.Attempt, limited), c.now().Add(wait),
				fmt.Sprintf("rate limited by %s (HTTP 429): resuming in %s", c.conf().Provider, wait.Round(time.Millisecond)))
		default:
			br.Record(true)
			transient++
			if transient > c.conf().Retries {
				return outcome{}, agents.Transient(fmt.Errorf("llm: %d attempts failed: %w", transient, out.err), 0)
			}
			wait := doubling(c.conf().Backoff, c.conf().MaxBackoff, transient)
			c.log.Info("llm call failed; retrying", "agent", d.Agent, "call", callID, "status", out.status, "in", wait, "err", out.err)
			if err := sleep(ctx, wait); err != nil {
				return outcome{}, err
			}
		}
	}
}

// doubling is base doubled n-1 times, capped.
func doubling(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) redact(s string) string {
	if c.red == nil {
		return s
	}
	return c.red.Redact(s)
}

func (c *Client) redactAll(msgs []schemas.LLMMessage) []schemas.LLMMessage {
	if c.red == nil {
		return msgs
	}
	out := make([]schemas.LLMMessage, len(msgs))
	for i, m := range msgs {
		m.Content = c.red.Redact(m.Content)
		out[i] = m
	}
	return out
}

// digest identifies a request's messages and tools.
func digest(msgs []schemas.LLMMessage, toolNames []string) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	enc.Encode(msgs)
	enc.Encode(toolNames)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// EstimateTokens estimates the prompt tokens of messages and tool specs: about
// four bytes a token, plus a few per message for the framing.
func EstimateTokens(msgs []schemas.LLMMessage, specs []tools.ToolSpec) int {
	n := 3
	for _, m := range msgs {
		b := len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			b += len(tc.Name) + len(tc.Arguments) + len(tc.ID)
		}
		n += 4 + (b+3)/4
	}
	for _, s := range specs {
		n += 8 + (len(s.Name)+len(s.Description)+len(s.Parameters)+3)/4
	}
	return n
}

// liveChunks publishes one call's streamed pieces on the correlation's live
// subject, as stream_chunk envelopes (never stored).
type liveChunks struct {
	c       *Client
	d       *agents.Delivery
	callID  string
	subject string
	index   int
}

func (c *Client) chunks(d *agents.Delivery, callID string) *liveChunks {
	corr := d.Env.CorrelationID
	if corr == "" {
		corr = d.Env.ID
	}
	return &liveChunks{c: c, d: d, callID: callID, subject: events.LiveSubject(d.Env.SessionID, corr)}
}

func (l *liveChunks) piece(kind, text string) { l.publish(kind, text) }
func (l *liveChunks) end(finish string)       { l.publish("end", finish) }
func (l *liveChunks) fail(err error)          { l.publish("error", l.c.redact(err.Error())) }

func (l *liveChunks) publish(kind, text string) {
	if l.c.live == nil || l.c.conf().NoStream {
		return
	}
	env, err := l.d.Env.Derive(schemas.TypeStreamChunk, l.d.Agent, "user", l.c.now(), schemas.StreamChunk{Index: l.index, Kind: kind, Text: text, CallID: l.callID})
	if err != nil {
		return
	}
	l.index++
	data, err := schemas.Marshal(env)
	if err != nil {
		return
	}
	if err := l.c.live.Publish(l.subject, data); err != nil {
		l.c.log.Debug("llm live chunk", "subject", l.subject, "err", err)
	}
}
