package reexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/agents/toolloop"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Defaults of Options.
const (
	DefaultIdle    = time.Second
	DefaultTimeout = 10 * time.Minute
)

// Options configure a re-execution.
type Options struct {
	// Runtime is today's configuration of the agents (tools, concurrency,
	// agents to run). JetStream, Store, Records and LLM are the engine's.
	Runtime runtime.Config
	// LLM configures the agents' LLM client. Nil: with a recording that
	// made LLM calls, the recorded model, at an endpoint that is never
	// called unless Live.
	LLM *llm.Config
	// Live makes the calls the recording lacks for real, and the run goes on
	// as a what-if.
	Live bool
	// Keep, with Live, is the log a run that diverged is kept in, as a fork
	// of the session re-executed (see WhatIf), under the session id KeepAs
	// (default: derived from the session's).
	Keep   *events.Log
	KeepAs string
	// Dir is the scratch directory of the new run's server and projections
	// (default: a temporary directory, removed afterwards).
	Dir string
	// Idle is how long the new run may produce nothing, with its agents
	// done with every message, before the engine stops waiting for recorded
	// events it has not produced (it diverged). With a message held (a
	// paused session), it waits ten times as long.
	Idle time.Duration
	// Timeout bounds the run.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Report is the result of a re-execution.
type Report struct {
	Session string `json:"session"`
	// Identical: every recorded event of the agents was produced again, the
	// same, and nothing else was.
	Identical bool `json:"identical"`
	// Events is how many of the agents' events were compared; Recorded how
	// many the recording has.
	Events   int `json:"events"`
	Recorded int `json:"recorded"`
	Inputs   int `json:"inputs"`
	// CallsServed were answered from the recording; CallsMade went out for
	// real (Live only); CallsMissing a whole recording lacked (a
	// divergence); CallsPending a recording that stops early (a session
	// still running, or --until) has no answer for: the new run may be past
	// its end there, and only the compared events say if it diverged.
	CallsServed  int      `json:"calls_served"`
	CallsMade    int      `json:"calls_made"`
	CallsMissing []string `json:"calls_missing,omitempty"`
	CallsPending []string `json:"calls_pending,omitempty"`
	// Running: the session was still running; what was recorded so far was
	// re-executed. Prefix: the recording was cut at Until.
	Running bool `json:"running,omitempty"`
	Prefix  bool `json:"prefix,omitempty"`
	// Undecodable lists recorded events that do not decode (another schema
	// version): not re-executed.
	Undecodable []Problem   `json:"undecodable,omitempty"`
	Divergence  *Divergence `json:"divergence,omitempty"`
	// WhatIf is the fork a live run that diverged was kept as.
	WhatIf *WhatIf `json:"what_if,omitempty"`
	// StartSeconds is the time taken to start the scratch runtime (its
	// server, projections and agents), before the first input; Seconds the
	// whole re-execution, start included.
	StartSeconds float64 `json:"start_seconds"`
	Seconds      float64 `json:"seconds"`
}

// WhatIf is a live re-execution kept as a fork: a session whose history is
// the re-executed one's up to ParentSeq, the last recorded event before the
// first divergence, then the new run's events from there on (inputs,
// outputs, the calls made for real), in the new run's order. It continues
// the work in flight at the point (schemas.SessionFork.Continued), and its
// events are marked agents.MetaWhatIf so no agent handles them again:
// 'sylk session show', 'sylk replay' and 'sylk dag show' read it like any
// fork, and what the user does in it from there runs for real.
type WhatIf struct {
	Session   string `json:"session"`
	Parent    string `json:"parent"`
	ParentSeq uint64 `json:"parent_seq"`
	Events    int    `json:"events"`
}

// Divergence is the first place the new run departs from the recording.
type Divergence struct {
	// Kind: "differs" (same position, other content), "missing" (not
	// produced again), "extra" (produced, not recorded), "request" (an LLM
	// call asked something else), "call" (a call the recording lacks),
	// "schedule" (a run had more nodes of a DAG in flight than the other
	// run's max_concurrency allows).
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	// Input is the recorded input the divergence follows from.
	Input    *Event         `json:"input,omitempty"`
	Recorded *Event         `json:"recorded,omitempty"`
	New      *Event         `json:"new,omitempty"`
	Fields   []Field        `json:"fields,omitempty"`
	Request  *RequestChange `json:"request,omitempty"`
}

// Run re-executes rec in a fresh runtime and compares what it produces with
// the recording: Start, Execute, Close.
func Run(ctx context.Context, rec *Recording, opts Options) (*Report, error) {
	rt, err := Start(ctx, rec, opts)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	return rt.Execute(ctx)
}

// ErrExecuted is returned by a second Execute of one Runtime: its runtime
// holds the first run's events, so a second would compare against them.
var ErrExecuted = errors.New("the re-execution's runtime has already executed its recording; start another")

// Runtime is a re-execution's scratch runtime, started with today's agents
// up and nothing fed yet. Starting it is a fixed cost, whatever the
// recording's length; Execute is the re-execution proper.
type Runtime struct {
	e        *engine
	dir      string // removed by Close, if the engine made it
	started  time.Time
	startup  time.Duration
	deadline time.Time
	cancel   context.CancelFunc
}

// Start starts rec's scratch runtime in Options.Dir: an embedded server, its
// projections and today's agents, every agent's consumer in place. Close it.
func Start(ctx context.Context, rec *Recording, opts Options) (*Runtime, error) {
	rt := &Runtime{started: time.Now()}
	if opts.Idle <= 0 {
		opts.Idle = DefaultIdle
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rt.deadline = rt.started.Add(opts.Timeout)
	// The runtime's goroutines outlive Start's caller's call, not its
	// context: they stop at Close, or at the deadline.
	ctx, rt.cancel = context.WithDeadline(ctx, rt.deadline)
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "sylk-reexec-")
		if err != nil {
			rt.cancel()
			return nil, err
		}
		dir, rt.dir = d, d
	}
	rt.e = newEngine(rec, opts)
	if err := rt.e.start(ctx, dir); err != nil {
		rt.Close()
		return nil, err
	}
	// An input appended before the agents' consumers exist would be
	// handled late, and the run look idle meanwhile.
	if err := agents.AwaitConsumers(ctx, rt.e.b.JetStream(), rt.e.names, time.Millisecond, rt.e.runErr); err != nil {
		rt.Close()
		return nil, fmt.Errorf("start the re-execution's agents: %w", err)
	}
	rt.startup = time.Since(rt.started)
	return rt, nil
}

// Execute feeds the recording's inputs to the runtime, waits for what they
// lead to, and compares every output with the recording; with Live and
// Keep, a run that diverged is kept as a what-if. Once per Runtime.
func (rt *Runtime) Execute(ctx context.Context) (*Report, error) {
	if rt.e.executed.Swap(true) {
		return nil, ErrExecuted
	}
	ctx, cancel := context.WithDeadline(ctx, rt.deadline)
	defer cancel()
	e := rt.e
	err := e.feed(ctx)
	// The agents stop before the comparison reads what they did; the
	// server and the projections stay open until Close.
	e.halt()
	if err != nil {
		return nil, err
	}
	r := e.report()
	if e.opts.Live && e.opts.Keep != nil && !r.Identical {
		if r.WhatIf, err = e.keep(ctx); err != nil {
			return nil, fmt.Errorf("keep the what-if of %s as a fork: %w", e.rec.Session, err)
		}
	}
	r.StartSeconds = rt.startup.Seconds()
	r.Seconds = time.Since(rt.started).Seconds()
	return r, nil
}

// Close stops the runtime and throws its server and projections away.
func (rt *Runtime) Close() {
	rt.e.halt()
	rt.e.close()
	rt.cancel()
	if rt.dir != "" {
		os.RemoveAll(rt.dir)
	}
}

// engine is one re-execution.
type engine struct {
	rec  *Recording
	opts Options

	b      *broker.Broker
	log    *events.Log
	store  *projections.Store
	client *llm.Client
	names  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr chan error
	tail   chan *events.Event

	// Calls, from the agents' goroutines.
	mu      sync.Mutex
	served  map[string]bool
	made    int
	missing []string
	pending []string
	changes []callChange
	// executed is set by the first Execute.
	executed atomic.Bool

	// Pairing, in the engine's goroutine.
	byID     map[string]*Recorded
	children map[string][]*Recorded
	outputs  []*Recorded
	next     int // outputs before it are paired
	pairOf   map[*Recorded]*schemas.Envelope
	newToRec map[string]*Recorded
	newByID  map[string]*schemas.Envelope
	newSeq   map[string]uint64
	lastSeq  uint64 // the last sequence the tail has read
	newOuts  []*schemas.Envelope
	// newLimits are the max_concurrency each DAG runs under in the new run.
	newLimits map[string]int
	lastNew   time.Time
	// run is the new run's events of the recording's sessions, in order;
	// at the first divergence's position (see report).
	run []*events.Event
	at  float64
}

// callChange is an LLM call whose request is not the recorded one, or that
// the recording lacks (change nil), made while handling delivery.
type callChange struct {
	delivery string
	call     string
	change   *RequestChange
}

func newEngine(rec *Recording, opts Options) *engine {
	e := &engine{rec: rec, opts: opts, served: map[string]bool{}, byID: map[string]*Recorded{}, children: map[string][]*Recorded{},
		pairOf: map[*Recorded]*schemas.Envelope{}, newToRec: map[string]*Recorded{}, newByID: map[string]*schemas.Envelope{}, newSeq: map[string]uint64{},
		newLimits: map[string]int{}}
	for _, r := range rec.Events {
		e.byID[r.Env.ID] = r
		if r.Kind == Output {
			e.outputs = append(e.outputs, r)
			e.children[r.Env.ParentID] = append(e.children[r.Env.ParentID], r)
		}
	}
	return e
}

// start runs a server, projections and today's agents in dir. Both are
// thrown away after the run, so neither keeps what a crash would need: the
// server keeps its streams in memory, the projections write no log and
// flush small memtables. The two start side by side.
func (e *engine) start(ctx context.Context, dir string) error {
	var serr error
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		e.store, serr = projections.Open(ctx, projections.Options{Dir: filepath.Join(dir, "projections"), Logger: e.opts.Logger, NoWAL: true,
			MemTableBytes: scratchMemTable, BatchBytes: scratchMemTable / 4})
	}()
	b, err := broker.Start(ctx, broker.Options{DataDir: filepath.Join(dir, "broker"), Listen: broker.ListenNone, Memory: true, NoAuth: true, Name: "sylk-reexec"})
	<-opened
	if err != nil {
		return fmt.Errorf("start the re-execution's server: %w", err)
	}
	e.b, e.log = b, events.New(b.JetStream())
	if serr != nil {
		return serr
	}
	cfg := e.opts.Runtime
	cfg.JetStream, cfg.Store, cfg.Records, cfg.Logger = b.JetStream(), e.store, e, e.opts.Logger
	// The recorded tool calls are served: a work directory removed since
	// the recording (a variant's worktree) has an empty one in its place.
	cfg.WorkDirStandIn = filepath.Join(dir, "workdir")
	if err := os.MkdirAll(cfg.WorkDirStandIn, 0o755); err != nil {
		return err
	}
	if c := e.llmConfig(); c != nil {
		if e.client, err = llm.NewClient(*c, llm.Deps{Records: e.store, Recording: e, Logger: e.opts.Logger}); err != nil {
			return err
		}
		cfg.LLM = e.client
	}
	e.names = cfg.Names()
	tail, err := e.log.Tail(ctx, events.Prefix+".>", events.Cursor{Seq: 1})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	e.cancel = cancel
	e.tail = make(chan *events.Event, 1024)
	e.runErr = make(chan error, 1)
	e.wg.Add(3)
	go func() {
		defer e.wg.Done()
		defer tail.Stop()
		for {
			ev, err := tail.Next(rctx)
			if err != nil {
				return
			}
			select {
			case e.tail <- ev:
			case <-rctx.Done():
				return
			}
		}
	}()
	go func() { defer e.wg.Done(); e.store.Projector(e.log).Run(rctx) }()
	go func() {
		defer e.wg.Done()
		if err := runtime.Run(rctx, cfg); err != nil && rctx.Err() == nil {
			e.runErr <- err
		}
	}()
	return nil
}

func (e *engine) llmConfig() *llm.Config {
	if e.opts.LLM != nil {
		c := *e.opts.LLM
		return &c
	}
	for _, r := range e.rec.requests {
		// Never called unless live: the answers come from the recording.
		return &llm.Config{BaseURL: "http://127.0.0.1:9/v1", Model: r.Model}
	}
	return nil
}

// halt stops the agents, the projector and the tail; it may be called again.
func (e *engine) halt() {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
}

// close closes what start opened; after halt.
func (e *engine) close() {
	if e.client != nil {
		e.client.Close()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.b != nil {
		e.b.Close()
	}
}

// feed appends the inputs in order, each once the new run has caught up with
// the recording before it, then waits for the rest.
func (e *engine) feed(ctx context.Context) error {
	e.lastNew = time.Now()
	inputs := e.rec.Inputs()
	for i, in := range inputs {
		if i > 0 {
			if err := e.settle(ctx, in.Seq); err != nil {
				return err
			}
		}
		env, err := e.translate(in)
		if err != nil {
			return err
		}
		if _, err := e.log.Append(ctx, env); err != nil {
			return fmt.Errorf("append input seq %d (%s): %w", in.Seq, in.Env.Type, err)
		}
	}
	if err := e.settle(ctx, 0); err != nil {
		return err
	}
	if e.cut() {
		return nil // the recording stops here; so does the comparison
	}
	return e.quiesce(ctx)
}

// translate gives an input the new run's stream positions: a fork's point
// is a sequence of the recorded stream, and becomes the new run's sequence of
// the same event (the last of the lineage at or before the point).
func (e *engine) translate(in *Recorded) (*schemas.Envelope, error) {
	if in.Env.Type != schemas.TypeSessionFork {
		return in.Env, nil
	}
	p, err := schemas.PayloadAs[schemas.SessionFork](in.Env)
	if err != nil {
		return in.Env, nil // fed as recorded: the projections refuse it as they did
	}
	var at uint64
	for _, r := range e.rec.Events {
		if r.Seq > p.ParentSeq {
			break
		}
		id := r.Env.ID
		if n := e.pairOf[r]; n != nil {
			id = n.ID
		}
		if s, ok := e.newSeq[id]; ok {
			at = s
		}
	}
	if at == 0 {
		return nil, fmt.Errorf("fork seq %d: the new run has no counterpart of the point of the fork of %s", in.Seq, p.Parent)
	}
	p.ParentSeq = at
	cp := *in.Env
	if err := cp.SetPayload(p); err != nil {
		return nil, err
	}
	return &cp, nil
}

// scratchMemTable is the largest memtable of the new run's projections.
const scratchMemTable = 16 << 20

// poll is how often the engine looks at the new run while it waits.
const poll = 10 * time.Millisecond

// settle takes the new run's events until every recorded output before seq
// (0: all) has its counterpart, or the run has been idle for Idle.
func (e *engine) settle(ctx context.Context, seq uint64) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for !e.pairedBefore(seq) {
		select {
		case ev := <-e.tail:
			e.take(ev)
		case err := <-e.runErr:
			return fmt.Errorf("the re-execution's agents: %w", err)
		case <-t.C:
			if stalled, err := e.stalled(ctx); stalled || err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("re-execution of %s: %w", e.rec.Session, ctx.Err())
		}
	}
	return nil
}

// stalled reports whether the new run has produced nothing for Idle with
// nothing left to do, or for ten times Idle in any case.
func (e *engine) stalled(ctx context.Context) (bool, error) {
	idle := time.Since(e.lastNew)
	switch {
	case idle > 10*e.opts.Idle:
		return true, nil
	case idle > e.opts.Idle:
		return e.quiet(ctx)
	}
	return false, nil
}

// quiesce takes the new run's events until its agents have nothing left to
// do, or it has produced nothing for a quarter of Idle, so an event produced
// beyond the recording is seen. (An Orchestrator with a backlog of
// completions whose steps are all appended already produces nothing more:
// waiting for it to drain would only add its backlog's time.)
func (e *engine) quiesce(ctx context.Context) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	check := true // at once, then every poll: a look costs a request per agent
	for {
		if check && len(e.tail) == 0 {
			check = false
			if time.Since(e.lastNew) > e.opts.Idle/4 {
				return nil
			}
			quiet, err := e.quiet(ctx)
			if err != nil || quiet {
				return err
			}
		}
		select {
		case ev := <-e.tail:
			e.take(ev)
		case <-ctx.Done():
			return fmt.Errorf("re-execution of %s: %w", e.rec.Session, ctx.Err())
		case <-t.C:
			check = true
		}
	}
}

// quiet reports whether every agent has handled everything and the tail has
// read the whole stream.
func (e *engine) quiet(ctx context.Context) (bool, error) {
	last, err := e.log.LastSeq(ctx)
	if err != nil {
		return false, err
	}
	if len(e.tail) > 0 || e.lastSeq < last {
		return false, nil
	}
	for _, name := range e.names {
		c, err := e.b.JetStream().Consumer(ctx, broker.Stream, agents.ConsumerName(name))
		if err != nil {
			return false, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return false, err
		}
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return false, nil
		}
	}
	return true, nil
}

func (e *engine) pairedBefore(seq uint64) bool {
	for e.next < len(e.outputs) && e.pairOf[e.outputs[e.next]] != nil {
		e.next++
	}
	return e.next == len(e.outputs) || (seq != 0 && e.outputs[e.next].Seq >= seq)
}

// take pairs one event of the new run with its recorded counterpart: the
// event with the same id (the same derivation from the same input), else the
// first unpaired recorded event of the same type caused by the counterpart of
// its cause.
func (e *engine) take(ev *events.Event) {
	e.lastNew = time.Now()
	env := ev.Env
	if env == nil {
		return
	}
	e.newSeq[env.ID] = ev.Seq
	e.lastSeq = max(e.lastSeq, ev.Seq)
	if slices.Contains(e.rec.Sessions, env.SessionID) {
		e.run = append(e.run, ev)
		if dag, limit, ok := limitOf(env); ok {
			e.newLimits[dag] = limit
		}
	}
	if r := e.byID[env.ID]; r != nil && r.Kind == Input {
		return // fed by the engine
	}
	if callRecords[env.Type] || !slices.Contains(e.rec.Sessions, env.SessionID) {
		return
	}
	e.newByID[env.ID] = env
	e.newOuts = append(e.newOuts, env)
	if r := e.byID[env.ID]; r != nil && r.Kind == Output && e.pairOf[r] == nil {
		e.pair(r, env)
		return
	}
	cause := e.recordedOf(env.ParentID)
	if cause == nil {
		return
	}
	for _, c := range e.children[cause.Env.ID] {
		if c.Env.Type == env.Type && e.pairOf[c] == nil {
			e.pair(c, env)
			return
		}
	}
}

func (e *engine) pair(r *Recorded, env *schemas.Envelope) {
	e.pairOf[r] = env
	e.newToRec[env.ID] = r
}

// recordedOf is the recorded counterpart of a new run's event id (an input
// has its own id).
func (e *engine) recordedOf(id string) *Recorded {
	if r := e.newToRec[id]; r != nil {
		return r
	}
	if r := e.byID[id]; r != nil && r.Kind == Input {
		return r
	}
	return nil
}

// ToolResult answers the agents' look-ups of recorded tool results: a call
// made for real in this run (Live), else the recording's. A call the
// recording lacks gets a failed result saying so, or with Live, none (it
// runs).
//
// A consultation is asked again, not served: it has no effect outside the
// stream, its request and answer are events of agents this run runs too
// (their model calls served), and served, the consulted agent would never
// be asked.
func (e *engine) ToolResult(ctx context.Context, callID string) (*schemas.ToolResult, uint64, error) {
	if r := e.rec.tools[callID]; r != nil && strings.HasPrefix(r.Tool, toolloop.ConsultPrefix) {
		return e.store.ToolResult(ctx, callID)
	}
	r, seq, err := served(ctx, e, callID, "tool call", e.store.ToolResult, e.rec.tools)
	if !errors.Is(err, projections.ErrNotFound) {
		return r, seq, err
	}
	e.miss("tool call " + callID)
	if e.opts.Live {
		e.mu.Lock()
		e.made++
		e.mu.Unlock()
		return nil, 0, err
	}
	return &schemas.ToolResult{CallID: callID, ExitCode: -1, Error: "re-execution: tool call " + callID + " is not in the recording"}, 0, nil
}

// SkillSelection answers a prompt node's skill selection from the recording
// (see skills.Records): the recorded skills and tools, whatever the skill
// files say today. A selection the recording lacks is made anew (the new
// run's divergence shows in the events it appends).
func (e *engine) SkillSelection(ctx context.Context, callID string) (*schemas.SkillsSelected, uint64, error) {
	r, seq, err := served(ctx, e, callID, "skill selection", e.store.SkillSelection, e.rec.skills)
	if errors.Is(err, projections.ErrNotFound) {
		e.miss("skill selection " + callID)
	}
	return r, seq, err
}

// HookDecision answers the hooks of one point from the recording (see
// hooks.Records): the recorded decision is applied, its events derived again,
// and no hook runs, hook programs included. A point the recording has no
// decision for (its hooks changed nothing, or today's configuration has
// hooks the recorded run did not) runs today's hooks.
func (e *engine) HookDecision(ctx context.Context, callID string) (*schemas.HookDecision, uint64, error) {
	return served(ctx, e, callID, "hook decision", e.store.HookDecision, e.rec.hooks)
}

// served answers a look-up of a call record: a copy of the recording's
// (counted as served), else the new run's own (a call the recording lacks,
// made for real in this run), else projections.ErrNotFound. The recording
// comes first: it is in memory, and the new run records only the calls it
// does not serve.
func served[T any](ctx context.Context, e *engine, callID, what string, own func(context.Context, string) (*T, uint64, error),
	recorded map[string]*T) (*T, uint64, error) {
	e.mu.Lock()
	r := recorded[callID]
	if r != nil {
		e.served[callID] = true
	}
	e.mu.Unlock()
	if r != nil {
		cp := *r
		return &cp, 0, nil
	}
	if r, seq, err := own(ctx, callID); !errors.Is(err, projections.ErrNotFound) {
		return r, seq, err
	}
	return nil, 0, fmt.Errorf("%s %s: %w", what, callID, projections.ErrNotFound)
}

// miss notes a call the recording has no answer for: pending if the
// recording stops early (a session still running, or --until), so the call
// may be past its end, else missing. Whether a pending call diverges shows
// in the events compared.
func (e *engine) miss(call string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cut() {
		e.pending = append(e.pending, call)
		return
	}
	e.missing = append(e.missing, call)
}

var _ hooks.Records = (*engine)(nil)

// Loadout reads the new run's loadouts.
func (e *engine) Loadout(ctx context.Context, session, agent string) (*projections.Loadout, error) {
	return e.store.Loadout(ctx, session, agent)
}

// Answer answers an LLM call from the recording (see llm.Recording).
func (e *engine) Answer(ctx context.Context, d *agents.Delivery, req schemas.LLMRequest) (*schemas.LLMResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	resp, asked := e.rec.llm[req.CallID], e.rec.requests[req.CallID]
	var change *RequestChange
	if asked != nil {
		change = requestChange(asked, &req)
	}
	if resp != nil && change == nil {
		e.served[req.CallID] = true
		cp := *resp
		return &cp, nil
	}
	why := "is not in the recording"
	switch {
	case change != nil:
		why = "asks something else than the recording"
		e.changes = append(e.changes, callChange{delivery: d.Env.ID, call: req.CallID, change: change})
	case asked != nil && e.cut():
		// Made by the recorded run too, unanswered where the recording
		// stops: the new run is past the recording.
		why = "is not answered in the recording yet"
		e.pending = append(e.pending, "LLM call "+req.CallID)
	default:
		e.changes = append(e.changes, callChange{delivery: d.Env.ID, call: req.CallID})
		e.missing = append(e.missing, "LLM call "+req.CallID)
	}
	if e.opts.Live {
		e.made++
		return nil, fmt.Errorf("LLM call %s %s: %w", req.CallID, why, projections.ErrNotFound)
	}
	return &schemas.LLMResponse{CallID: req.CallID, Model: req.Model, Error: "re-execution: LLM call " + req.CallID + " " + why}, nil
}

// report compares the runs and finds the first divergence.
func (e *engine) report() *Report {
	r := &Report{Session: e.rec.Session, Recorded: len(e.outputs), Inputs: len(e.rec.Inputs()), Running: e.rec.Running, Prefix: e.rec.Prefix,
		Undecodable: e.rec.Problems}
	e.mu.Lock()
	r.CallsServed, r.CallsMade = len(e.served), e.made
	r.CallsMissing, r.CallsPending = slices.Clone(e.missing), slices.Clone(e.pending)
	changes := slices.Clone(e.changes)
	e.mu.Unlock()

	var first *Divergence
	var at float64
	consider := func(pos float64, d *Divergence) {
		if first == nil || pos < at {
			first, at = d, pos
		}
	}
	for _, c := range changes {
		pos := e.position(c.delivery) + 0.25
		d := &Divergence{Kind: "request", Request: c.change, Input: e.input(c.delivery)}
		if c.change == nil {
			d.Kind, d.Reason = "call", fmt.Sprintf("LLM call %s is not in the recording", c.call)
		} else {
			d.Reason = c.change.String()
		}
		consider(pos, d)
	}
	for _, rec := range e.outputs {
		n := e.pairOf[rec]
		if n == nil {
			consider(float64(rec.Seq), &Divergence{Kind: "missing", Reason: fmt.Sprintf("the new run did not produce the recorded %s (seq %d)", rec.Env.Type, rec.Seq),
				Input: e.input(rec.Env.ID), Recorded: Normalize(rec.Seq, rec.Env)})
			continue
		}
		r.Events++
		if same(rec.Env, n) {
			continue
		}
		a, b := Normalize(rec.Seq, rec.Env), Normalize(e.newSeq[n.ID], n)
		if f := Diff(a, b); len(f) > 0 {
			consider(float64(rec.Seq), &Divergence{Kind: "differs", Reason: fmt.Sprintf("%s (seq %d) differs in %d field(s)", rec.Env.Type, rec.Seq, len(f)),
				Input: e.input(rec.Env.ID), Recorded: a, New: b, Fields: f})
		}
	}
	if !e.cut() {
		for _, n := range e.newOuts {
			if e.newToRec[n.ID] != nil || e.beyond(n) || n.SessionID != e.rec.Session {
				// An ancestor's events after the fork point are beyond
				// the recording of a fork.
				continue
			}
			consider(e.position(n.ParentID)+0.5, &Divergence{Kind: "extra", Reason: fmt.Sprintf("the new run produced a %s the recording does not have", n.Type),
				Input: e.input(n.ID), New: Normalize(e.newSeq[n.ID], n)})
		}
	}
	e.scheduleDivergences(consider)
	r.Divergence = first
	r.Identical = first == nil
	e.at = at
	return r
}

// cut reports whether the recording stops before the session's end: the
// session was still running when it was read, or --until cut it.
func (e *engine) cut() bool { return e.rec.Running || e.rec.Prefix }

// beyond reports whether n replies to a recorded event its agent had not
// handled when the recording was read.
func (e *engine) beyond(n *schemas.Envelope) bool {
	h, ok := e.rec.Handled[n.Source]
	return ok && e.position(n.ParentID) > float64(h)
}

// position is the recorded sequence of a new run's event (or an input), or
// of its nearest ancestor that has one.
func (e *engine) position(id string) float64 {
	for range 1 << 16 {
		if r := e.recordedOf(id); r != nil {
			return float64(r.Seq)
		}
		n := e.newByID[id]
		if n == nil {
			return 0
		}
		id = n.ParentID
	}
	return 0
}

// input is the recorded input an event (recorded or new) follows from.
func (e *engine) input(id string) *Event {
	for range 1 << 16 {
		if r := e.byID[id]; r != nil {
			if r.Kind == Input {
				return Normalize(r.Seq, r.Env)
			}
			id = r.Env.ParentID
			continue
		}
		n := e.newByID[id]
		if n == nil {
			return nil
		}
		id = n.ParentID
	}
	return nil
}
