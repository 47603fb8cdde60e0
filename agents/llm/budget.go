package llm

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Budget errors: a call refused before it was made. Each wraps
// ErrBudgetExceeded; the error says the scope, its limit and what is spent.
var (
	ErrBudgetExceeded        = errors.New("token budget exceeded")
	ErrGlobalBudgetExceeded  = fmt.Errorf("global %w", ErrBudgetExceeded)
	ErrSessionBudgetExceeded = fmt.Errorf("session %w", ErrBudgetExceeded)
	ErrTaskBudgetExceeded    = fmt.Errorf("task %w", ErrBudgetExceeded)
)

// Scope is what a budget covers: everything (zero Scope), one session
// (Session), or one DAG node of a session (Session, DAGID and NodeID).
type Scope struct {
	Session string
	DAGID   string
	NodeID  string
}

func (s Scope) String() string {
	switch {
	case s.Session == "":
		return "global"
	case s.DAGID == "" && s.NodeID == "":
		return "session " + s.Session
	}
	return fmt.Sprintf("task %s/%s of session %s", s.DAGID, s.NodeID, s.Session)
}

// Usage says how many tokens were spent: the sum of total_tokens over the
// llm_usage events in a scope. A usage projection implements it; so does
// Ledger. It may lag the stream a little: the client adds its own recent
// calls and the ones in flight.
type Usage interface {
	Spent(ctx context.Context, s Scope) (int64, error)
}

// UsageRecorder is a Usage the client tells about each call it records, so
// its budgets see the call before any projection does. Add must ignore a
// call id it has seen. Ledger is one.
type UsageRecorder interface {
	Add(session string, u schemas.LLMUsage)
}

// Ledger folds llm_usage events into totals per scope, agent and model: the
// usage projection in memory. Feed it with Follow (the stream, then live) or
// Add; it is safe for concurrent use.
type Ledger struct {
	mu     sync.RWMutex
	seen   map[string]bool
	totals map[Scope]*Totals
	agents map[string]*Totals
	models map[string]*Totals
	tasks  map[Scope]bool
}

// Totals are the tokens, calls and cost of a group of calls.
type Totals struct {
	Calls            int64   `json:"calls"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	TotalTokens      int64   `json:"total_tokens"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
}

func (t *Totals) add(u schemas.LLMUsage) {
	t.Calls++
	t.PromptTokens += int64(u.Usage.PromptTokens)
	t.CompletionTokens += int64(u.Usage.CompletionTokens)
	t.TotalTokens += int64(u.Usage.TotalTokens)
	t.CostUSD += u.CostUSD
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{seen: map[string]bool{}, totals: map[Scope]*Totals{}, agents: map[string]*Totals{}, models: map[string]*Totals{}, tasks: map[Scope]bool{}}
}

// Add counts one call's usage, once per call id.
func (l *Ledger) Add(session string, u schemas.LLMUsage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u.CallID != "" {
		if l.seen[u.CallID] {
			return
		}
		l.seen[u.CallID] = true
	}
	scopes := []Scope{{}, {Session: session}}
	if u.DAGID != "" || u.NodeID != "" {
		task := Scope{Session: session, DAGID: u.DAGID, NodeID: u.NodeID}
		scopes = append(scopes, task)
		l.tasks[task] = true
	}
	for _, s := range scopes {
		bump(l.totals, s, u)
	}
	bump(l.agents, u.Agent, u)
	bump(l.models, u.Model, u)
}

func bump[K comparable](m map[K]*Totals, k K, u schemas.LLMUsage) {
	t, ok := m[k]
	if !ok {
		t = &Totals{}
		m[k] = t
	}
	t.add(u)
}

// Apply counts an llm_usage event; other events are ignored.
func (l *Ledger) Apply(env *schemas.Envelope) {
	if env == nil || env.Type != schemas.TypeLLMUsage {
		return
	}
	u, err := schemas.PayloadAs[schemas.LLMUsage](env)
	if err != nil {
		return
	}
	l.Add(env.SessionID, *u)
}

// Spent implements Usage.
func (l *Ledger) Spent(_ context.Context, s Scope) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if t, ok := l.totals[s]; ok {
		return t.TotalTokens, nil
	}
	return 0, nil
}

// Follow folds every llm_usage event in log, then follows new ones until ctx
// ends. It returns once the events so far are counted; stop waits for the
// follower to end.
func (l *Ledger) Follow(ctx context.Context, log *events.Log) (stop func(), err error) {
	last, err := l.Read(ctx, log, "", 0)
	if err != nil {
		return nil, err
	}
	tail, err := log.Tail(ctx, events.Filter{Type: schemas.TypeLLMUsage}.Subject(), events.Cursor{Seq: last + 1})
	if err != nil {
		return nil, fmt.Errorf("llm usage: follow: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tail.Stop()
		for {
			ev, err := tail.Next(ctx)
			if err != nil {
				return
			}
			l.Apply(ev.Env)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// Read folds the llm_usage events in log up to sequence to (0: so far), of
// one session or of every session with session "", and returns the sequence
// of the last one.
func (l *Ledger) Read(ctx context.Context, log *events.Log, session string, to uint64) (last uint64, err error) {
	subject := events.Filter{Session: session, Type: schemas.TypeLLMUsage}.Subject()
	if err := log.Scan(ctx, subject, events.Cursor{}, to, func(ev *events.Event) error {
		l.Apply(ev.Env)
		last = ev.Seq
		return nil
	}); err != nil {
		return 0, fmt.Errorf("llm usage: read: %w", err)
	}
	return last, nil
}

// Report is usage broken down for `sylk usage` (seed L4255-4307).
type Report struct {
	Total     Totals            `json:"total"`
	BySession map[string]Totals `json:"by_session,omitempty"`
	ByTask    []TaskTotals      `json:"by_task,omitempty"`
	ByAgent   map[string]Totals `json:"by_agent,omitempty"`
	ByModel   map[string]Totals `json:"by_model,omitempty"`
}

// TaskTotals are one DAG node's totals.
type TaskTotals struct {
	Scope  Scope  `json:"scope"`
	Totals Totals `json:"totals"`
}

// TaskUsage is one DAG node's totals, flat for JSON readers (`sylk usage
// --json`, the web view).
type TaskUsage struct {
	Session string `json:"session"`
	DAG     string `json:"dag"`
	Node    string `json:"node"`
	Totals
}

// Tasks is ByTask flattened.
func (r Report) Tasks() []TaskUsage {
	out := make([]TaskUsage, 0, len(r.ByTask))
	for _, t := range r.ByTask {
		out = append(out, TaskUsage{Session: t.Scope.Session, DAG: t.Scope.DAGID, Node: t.Scope.NodeID, Totals: t.Totals})
	}
	return out
}

// Report returns the totals; session "" reports every session (agent and
// model breakdowns are always over everything).
func (l *Ledger) Report(session string) Report {
	l.mu.RLock()
	defer l.mu.RUnlock()
	r := Report{BySession: map[string]Totals{}, ByAgent: map[string]Totals{}, ByModel: map[string]Totals{}}
	if t, ok := l.totals[Scope{}]; ok {
		r.Total = *t
	}
	for s, t := range l.totals {
		if s.Session != "" && s.DAGID == "" && s.NodeID == "" && (session == "" || s.Session == session) {
			r.BySession[s.Session] = *t
		}
	}
	if session != "" {
		r.Total = r.BySession[session]
	}
	for s := range l.tasks {
		if session == "" || s.Session == session {
			r.ByTask = append(r.ByTask, TaskTotals{Scope: s, Totals: *l.totals[s]})
		}
	}
	sort.Slice(r.ByTask, func(i, j int) bool {
		a, b := r.ByTask[i].Scope, r.ByTask[j].Scope
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		if a.DAGID != b.DAGID {
			return a.DAGID < b.DAGID
		}
		return a.NodeID < b.NodeID
	})
	for k, t := range l.agents {
		r.ByAgent[k] = *t
	}
	for k, t := range l.models {
		r.ByModel[k] = *t
	}
	return r
}

// budget checks calls against the limits: spent (from Usage) plus reserved
// (calls in flight) plus the estimate must stay within each limit.
type budget struct {
	limits atomic.Pointer[Budgets] // replaced by Client.Reconfigure
	usage  Usage

	mu       sync.Mutex
	reserved map[Scope]int64
}

func newBudget(limits Budgets, usage Usage) *budget {
	b := &budget{usage: usage, reserved: map[Scope]int64{}}
	b.limits.Store(&limits)
	return b
}

// limit is one budget a call is checked against.
type limit struct {
	scope Scope
	max   int64
	err   error
}

func (b *budget) limitsFor(session, dag, node string) []limit {
	limits := b.limits.Load()
	out := []limit{
		{Scope{}, limits.Global, ErrGlobalBudgetExceeded},
		{Scope{Session: session}, limits.Session, ErrSessionBudgetExceeded},
	}
	if dag != "" || node != "" {
		out = append(out, limit{Scope{Session: session, DAGID: dag, NodeID: node}, limits.Task, ErrTaskBudgetExceeded})
	}
	return out
}

// reserve checks estimate against every limit and holds it until release.
func (b *budget) reserve(ctx context.Context, session, dag, node string, estimate int64) (release func(), err error) {
	scopes := b.limitsFor(session, dag, node)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range scopes {
		if s.max <= 0 {
			continue
		}
		spent, err := b.usage.Spent(ctx, s.scope)
		if err != nil {
			return nil, fmt.Errorf("llm budget: usage of %s: %w", s.scope, err)
		}
		if held := b.reserved[s.scope]; spent+held+estimate > s.max {
			return nil, fmt.Errorf("%w: %s has spent %d tokens (%d more in flight) of its %d, and this call needs about %d",
				s.err, s.scope, spent, held, s.max, estimate)
		}
	}
	for _, s := range scopes {
		b.reserved[s.scope] += estimate
	}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, s := range scopes {
			if b.reserved[s.scope] -= estimate; b.reserved[s.scope] <= 0 {
				delete(b.reserved, s.scope)
			}
		}
	}, nil
}

// CheckBudget reports whether a call of about estimate tokens, for session
// and the task dag/node (may be empty), fits every budget now: what the usage
// records say was spent plus the calls in flight. It reserves nothing (the
// call itself does, in Complete); an error wraps ErrBudgetExceeded and says
// which budget and how much is left. The token budget hook asks it before
// an LLM call.
func (c *Client) CheckBudget(ctx context.Context, session, dag, node string, estimate int64) error {
	release, err := c.budget.reserve(ctx, session, dag, node, estimate)
	if err != nil {
		return err
	}
	release()
	return nil
}
