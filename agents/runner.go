package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Handler handles the messages addressed to one agent kind.
type Handler interface {
	// Handle processes one delivery and returns the events to append. The runner
	// appends them, then acks. An error is classified (Transient, Permanent);
	// a handler must not ack, and must record its side effects through the
	// Delivery so a redelivery reuses them.
	Handle(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
	return f(ctx, d)
}

// MessageHooks run around the handling of each message: the PreMessage and
// PostMessage points of the hook pipeline (hooks.Pipeline). Their events are
// appended with the handler's, before the ack.
type MessageHooks interface {
	// PreMessage runs before the handler: events to append, and whether to
	// call the handler at all (a hook blocked the message: Step 0 rerouting
	// work outside the agent's domain).
	PreMessage(ctx context.Context, d *Delivery) (events []*schemas.Envelope, handle bool, err error)
	// PostMessage sees the handler's outputs and returns the events to
	// append: the outputs, changed or not, and the hooks' own.
	PostMessage(ctx context.Context, d *Delivery, outs []*schemas.Envelope) ([]*schemas.Envelope, error)
}

// Caught is what the runner waits for before handling a redelivered message:
// the projections, caught up to a stream sequence, so recorded side effects are
// visible. projections.Store implements it.
type Caught interface {
	WaitFor(ctx context.Context, seq uint64) error
}

// Defaults.
const (
	DefaultConcurrency   = 4
	DefaultMaxAckPending = 256
	// DefaultAckWait is short so that the work of a process that died is
	// redelivered within seconds (after a restart of the only server too: the
	// server expires, at once, deliveries older than this). A live process
	// never loses its work to the short wait: keepAlive reports progress on
	// every message it holds three times per AckWait.
	DefaultAckWait    = 3 * time.Second
	DefaultMaxDeliver = 10
)

// Options configure a Runner.
type Options struct {
	// Agent is the kind: its consumer is agent-<Agent>, filtered to
	// sylk.v1.*.*.<Agent>.* unless Filters says otherwise.
	Agent   string
	Filters []string
	// Concurrency is how many messages this process handles at once;
	// PerSession caps one session's share of them (fair share).
	Concurrency int
	PerSession  int
	// MaxAckPending bounds the messages handed out and not yet acked across all
	// processes of this kind: backpressure.
	MaxAckPending int
	// GroupCommit appends the outputs of concurrent handlers together
	// (groupCommit): for a stream that syncs every write (--sync always),
	// where it saves a sync per event; on one that does not, the batches
	// only cost.
	GroupCommit bool
	AckWait     time.Duration
	// MaxDeliver is the last delivery: a transient failure on it dead-letters.
	MaxDeliver int
	// Backoff is the delay before retrying a transient failure.
	Backoff func(attempt int) time.Duration
	// Hooks, when set, run around each message's handling.
	Hooks MessageHooks
	// SkipCancelled acks, without handling, messages of a session cancelled
	// after they were appended (the workers); the orchestrator sees everything.
	SkipCancelled bool
	// Caught, when set, is waited on before a redelivered message is handled.
	Caught Caught
	// OnDeadLetter, when set, is called when the runner gives up on a message
	// it can decode (a permanent error, the last delivery failing, or the
	// server's MaxDeliver used up by crashes): the events it returns are
	// appended, so whoever waits for the message's outcome hears of it (a
	// worker tells the Orchestrator its node failed). Derive them from d, so
	// a report made twice is appended once.
	OnDeadLetter func(d *Delivery, reason string) ([]*schemas.Envelope, error)
	Logger       *slog.Logger
	Now          func() time.Time
}

// EnsureDefaults fills unset options and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PerSession <= 0 {
		o.PerSession = max(1, o.Concurrency/2)
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if o.Backoff == nil {
		o.Backoff = Backoff(100*time.Millisecond, 5*time.Second)
	}
	if len(o.Filters) == 0 {
		o.Filters = []string{events.Filter{Target: o.Agent}.Subject()}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate checks the options.
func (o *Options) Validate() error {
	if err := schemas.CheckName("agent", o.Agent); err != nil {
		return err
	}
	if o.PerSession > o.Concurrency {
		return fmt.Errorf("agent %s: PerSession %d exceeds Concurrency %d", o.Agent, o.PerSession, o.Concurrency)
	}
	return nil
}

// awaitAttempt bounds one lookup of AwaitConsumers. (A variable for tests.)
var awaitAttempt = 2 * time.Second

// ConsumerName is the durable consumer of an agent kind.
func ConsumerName(agent string) string { return "agent-" + agent }

// AwaitConsumers waits until every named agent's consumer exists on js,
// looking every poll: from then on the agents take what is appended as soon
// as it is. An error on failed (the agents' runtime stopping; nil: none) ends
// the wait with it. A lookup sent while a cluster elects a leader is never
// answered: each is bounded by awaitAttempt and, unanswered, asked again.
func AwaitConsumers(ctx context.Context, js jetstream.JetStream, names []string, poll time.Duration, failed <-chan error) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for _, name := range names {
		for {
			actx, cancel := context.WithTimeout(ctx, awaitAttempt)
			_, err := js.Consumer(actx, broker.Stream, ConsumerName(name))
			cancel()
			if err == nil {
				break
			}
			if !broker.Unanswered(ctx, err) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("wait for agent %s's consumer: %w", name, err)
			}
			select {
			case err := <-failed:
				return fmt.Errorf("the agents stopped: %w", err)
			case <-t.C:
			case <-ctx.Done():
				return fmt.Errorf("wait for agent %s's consumer: %w", name, ctx.Err())
			}
		}
	}
	return nil
}

// Runner consumes one agent kind's messages and hands them to its handler.
type Runner struct {
	opts    Options
	js      jetstream.JetStream
	log     *events.Log
	handler Handler
	signals *signalState
	sched   *scheduler
	outputs *groupCommit

	// appended is the highest sequence the runner's handlers have had
	// appended (outputs and AppendNow): see Delivery.Floor.
	appended atomic.Uint64

	// root is Run's context: when it ends, the runner is stopping.
	root       context.Context
	breakersMu sync.Mutex
	breakers   map[string]*Breaker
}

// NewRunner returns a runner of h for opts.Agent over the stream of js.
func NewRunner(js jetstream.JetStream, h Handler, opts Options) (*Runner, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	log := events.New(js)
	return &Runner{
		opts: opts, js: js, log: log, handler: h, outputs: &groupCommit{log: log, shared: opts.GroupCommit},
		signals: newSignalState(),
		sched:   newScheduler(opts.PerSession),
	}, nil
}

// ConsumerConfig is the durable consumer of the runner's agent kind.
func (r *Runner) ConsumerConfig() jetstream.ConsumerConfig {
	o := r.opts
	cfg := jetstream.ConsumerConfig{
		Durable:       ConsumerName(o.Agent),
		Description:   "Sylk agent " + o.Agent,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    o.MaxDeliver,
		MaxAckPending: o.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if len(o.Filters) == 1 {
		cfg.FilterSubject = o.Filters[0]
	} else {
		cfg.FilterSubjects = o.Filters
	}
	return cfg
}

// Run consumes until ctx ends. It first reads every signal so far, so a session
// paused before a restart stays paused, then follows signals live while it
// works. It returns nil when ctx is cancelled.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.root = ctx
	if err := r.signals.follow(ctx, r.log, r.onSignal); err != nil {
		return err
	}
	cons, err := r.js.CreateOrUpdateConsumer(ctx, broker.Stream, r.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("agent %s: consumer: %w", r.opts.Agent, err)
	}
	adv, err := r.watchMaxDeliveries(ctx)
	if err != nil {
		return err
	}
	defer adv.Unsubscribe()

	var workers sync.WaitGroup
	for range r.opts.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.work(ctx)
		}()
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { r.sched.push(ctx, r, m) },
		jetstream.PullMaxMessages(r.opts.Concurrency*2), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) {
				r.opts.Logger.Debug("consume", "agent", r.opts.Agent, "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("agent %s: consume: %w", r.opts.Agent, err)
	}
	r.keepAlive(ctx)
	cc.Stop()
	r.sched.close()
	workers.Wait()
	// Messages still queued were never handled: give them back at once.
	for _, j := range r.sched.drain() {
		j.msg.Nak()
	}
	return nil
}

// pullExpiry is how long each pull request of a runner's consumer lasts:
// a pull left with a cluster member that died (the consumer's leader,
// SIGKILLed) is replaced within it, where the default (30 s) would leave
// the agent idle for half a minute.
const pullExpiry = 10 * time.Second

// pullHeartbeat is how often the server tells a waiting pull it is alive;
// a client that misses two pulls again. Without it the client's default is
// half of pullExpiry, and a consumer that falls behind loses its pulls now
// and then: the server holds none while the client counts its batch as
// still outstanding (seen on the Orchestrator's consumer at max ack pending
// under a wide DAG: waiting 0, thousands of messages pending), and the agent
// sat idle for the 10 s of two missed heartbeats. At the least the client
// allows (500 ms), such a stall lasts about a second.
const pullHeartbeat = 500 * time.Millisecond

// keepAlive tells the server, every third of AckWait until ctx ends, that the
// jobs this process holds are being worked on or waiting their turn (held),
// so a long tool run or a paused session's backlog is not redelivered to
// another process. One loop for all jobs: a per-message timer would cost more
// than the message.
func (r *Runner) keepAlive(ctx context.Context) {
	t := time.NewTicker(r.opts.AckWait / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, j := range r.sched.held() {
				j.msg.InProgress()
			}
		}
	}
}

// Held counts the messages this process holds unstarted because their
// session (or everything) is paused.
func (r *Runner) Held() int {
	n := 0
	for _, j := range r.sched.queued() {
		if r.signals.holds(j) {
			n++
		}
	}
	return n
}

// Agent is the agent kind the runner consumes for.
func (r *Runner) Agent() string { return r.opts.Agent }

func (r *Runner) onSignal(s signalEvent) {
	// Only workers stop what they are doing: the orchestrator must finish
	// handling a cancel (the signal itself is in flight there).
	if s.Action == schemas.SignalCancel && r.opts.SkipCancelled {
		r.sched.cancelInFlight(s)
	}
	r.sched.wake()
}

func (r *Runner) work(ctx context.Context) {
	for {
		j, ok := r.sched.next(r.signals)
		if !ok {
			return
		}
		r.process(ctx, j)
		r.sched.done(j)
	}
}

// process handles one job from decode to ack.
func (r *Runner) process(ctx context.Context, j *job) {
	msg, o := j.msg, r.opts
	if j.env == nil {
		r.deadLetter(ctx, msg, j.md, "invalid envelope: "+j.decodeErr.Error(), nil)
		msg.Term()
		return
	}
	if err := events.CheckSource(msg.Subject(), j.env); err != nil {
		r.deadLetter(ctx, msg, j.md, err.Error(), nil)
		msg.Term()
		return
	}
	if j.env.Metadata[MetaWhatIf] != "" {
		msg.Ack()
		return
	}
	if o.SkipCancelled && r.signals.cancelled(j.env.SessionID, j.md.Sequence.Stream) {
		o.Logger.Info("skipping cancelled work", "agent", o.Agent, "session", j.env.SessionID, "type", j.env.Type, "seq", j.md.Sequence.Stream)
		msg.Ack()
		return
	}
	d := &Delivery{Env: j.env, Seq: j.md.Sequence.Stream, Attempt: int(j.md.NumDelivered), Agent: o.Agent, runner: r}

	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	j.setCancel(hcancel)

	err := r.handle(ctx, hctx, d)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		// Cancelled by a signal while running.
		err = Permanent(fmt.Errorf("cancelled by signal: %w", err))
	}
	class, delay := Classify(ctx, err)
	switch class {
	case ClassNone:
		// A plain ack: if it is lost, the redelivery finds its outputs already
		// in the stream (derived ids) and its side effects recorded.
		if aerr := msg.Ack(); aerr != nil {
			o.Logger.Warn("ack", "agent", o.Agent, "seq", d.Seq, "err", aerr)
		}
	case ClassStopping:
		msg.Nak()
	case ClassTransient:
		if d.Attempt >= o.MaxDeliver {
			r.deadLetter(ctx, msg, j.md, fmt.Sprintf("gave up after %d deliveries: %v", d.Attempt, err), j.env)
			msg.Term()
			return
		}
		if delay <= 0 {
			delay = o.Backoff(d.Attempt)
		}
		o.Logger.Info("retrying", "agent", o.Agent, "seq", d.Seq, "attempt", d.Attempt, "in", delay, "err", err)
		msg.NakWithDelay(delay)
	case ClassPermanent:
		r.deadLetter(ctx, msg, j.md, err.Error(), j.env)
		msg.TermWithReason(truncate(err.Error(), 200))
	}
}

// handle runs the handler under hctx (which a cancel signal ends) and appends
// its outputs under ctx (which only the runner's stop ends): a handler that
// reports its cancellation gets the report recorded.
func (r *Runner) handle(ctx, hctx context.Context, d *Delivery) error {
	if d.Attempt > 1 && r.opts.Caught != nil {
		// A redelivery: whatever an earlier attempt recorded must be visible
		// before the handler looks for it.
		if err := CatchUp(hctx, r.log, r.opts.Caught); err != nil {
			return err
		}
	}
	if d.Env != nil && d.Env.Priority >= schemas.PriorityUserInteractive {
		// The user's own request: its tool processes may use the slots the
		// pool keeps for the user.
		hctx = tools.ForUser(hctx)
	}
	outs, err := r.hooked(hctx, d)
	// Tool results the handler left to the runner are recorded whatever
	// follows: the tools ran.
	results := d.takeResults()
	if err != nil {
		if aerr := r.appendOutputs(ctx, results); aerr != nil {
			return aerr
		}
		return err
	}
	return r.appendOutputs(ctx, slices.Concat(results, d.takeEmitted(), outs))
}

// hooked runs the handler between the message hooks, if any.
func (r *Runner) hooked(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
	h := r.opts.Hooks
	if h == nil {
		return r.handler.Handle(ctx, d)
	}
	pre, handle, err := h.PreMessage(ctx, d)
	if err != nil || !handle {
		return pre, err
	}
	outs, err := r.handler.Handle(ctx, d)
	if err != nil {
		return nil, err
	}
	post, err := h.PostMessage(ctx, d, outs)
	if err != nil {
		return nil, err
	}
	return append(pre, post...), nil
}

// CatchUpWait bounds CatchUp: projections that have not caught up by then
// (a stuck projector, a rebuild of a long stream) make the message go back to
// the stream, for this process or another to handle it later, rather than
// hold it for as long as the keep-alive runs.
const CatchUpWait = 30 * time.Second

// CatchUp waits until c has applied everything the stream held when it was
// called, for at most CatchUpWait. Its errors are Transient: the message is
// handled again after a backoff.
func CatchUp(ctx context.Context, log *events.Log, c Caught) error {
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	last, err := log.LastSeq(ctx)
	if err != nil {
		return Transient(fmt.Errorf("read the stream's last sequence: %w", err), 0)
	}
	if err := c.WaitFor(ctx, last); err != nil {
		return Transient(fmt.Errorf("projections catching up to seq %d: %w", last, err), 0)
	}
	return nil
}

// CatchUpFloor waits until c has applied d.Floor(): the message d and
// everything its runner appended before, for at most CatchUpWait. It is
// CatchUp without the request for the stream's last sequence, for a handler
// that decides from the message and its own earlier records (a redelivery
// is caught up with the whole stream by the runner first). Its errors are
// Transient.
func CatchUpFloor(ctx context.Context, d *Delivery, c Caught) error {
	return CatchUpTo(ctx, c, d.Floor())
}

// CatchUpTo waits until c has applied seq, for at most CatchUpWait. Its
// errors are Transient.
func CatchUpTo(ctx context.Context, c Caught, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, CatchUpWait)
	defer cancel()
	if err := c.WaitFor(ctx, seq); err != nil {
		return Transient(fmt.Errorf("projections catching up to seq %d: %w", seq, err), 0)
	}
	return nil
}

// appendOutputs appends a handler's events in order, sharing the stream's
// syncs with the other handlers' (groupCommit).
func (r *Runner) appendOutputs(ctx context.Context, outs []*schemas.Envelope) error {
	seq, err := r.outputs.append(ctx, outs)
	if err != nil {
		return err
	}
	r.noteAppended(seq)
	return nil
}

// noteAppended raises the runner's highest appended sequence to seq.
func (r *Runner) noteAppended(seq uint64) {
	for {
		cur := r.appended.Load()
		if seq <= cur || r.appended.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func classifyAppend(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, schemas.ErrInvalid):
		return Permanent(fmt.Errorf("handler produced an invalid event: %w", err))
	case errors.Is(err, nats.ErrMaxPayload):
		// Larger than the server takes: no retry stores it.
		return Permanent(err)
	}
	return Transient(err, 0)
}

// stopping reports whether the runner is shutting down.
func (r *Runner) stopping(context.Context) bool { return r.root != nil && r.root.Err() != nil }

// breaker returns the process's circuit breaker for a resource. Its
// transitions are appended as circuit_change events of the system session.
func (r *Runner) breaker(resource string) *Breaker {
	r.breakersMu.Lock()
	defer r.breakersMu.Unlock()
	if b, ok := r.breakers[resource]; ok {
		return b
	}
	if r.breakers == nil {
		r.breakers = map[string]*Breaker{}
	}
	cfg, ok := DefaultBreakers()[resource]
	if !ok {
		cfg = DefaultBreakers()["network"]
	}
	b := NewBreaker(resource, cfg, r.opts.Now, func(c BreakerChange) {
		r.opts.Logger.Warn("circuit breaker", "agent", r.opts.Agent, "resource", c.Resource, "from", c.From, "to", c.To, "reason", c.Reason)
		env, err := schemas.New(schemas.TypeCircuitChange, schemas.SystemSession, r.opts.Agent, "user", r.opts.Now(),
			schemas.CircuitChange{Resource: c.Resource, From: c.From, To: c.To, Reason: c.Reason, Failures: c.Failures})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.root), 5*time.Second)
			defer cancel()
			r.log.Append(ctx, env)
		}
	})
	r.breakers[resource] = b
	return b
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func sessionOf(subject string) string {
	toks := strings.Split(subject, ".")
	if len(toks) == 6 && schemas.ValidName(toks[2]) {
		return toks[2]
	}
	return schemas.SystemSession
}
