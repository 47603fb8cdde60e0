package agents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct {
	t   *testing.T
	b   *broker.Broker
	log *events.Log
	ctx context.Context
}

func newHarness(t *testing.T) *harness {
	b := brokertest.Start(t, brokertest.Options(t))
	return &harness{t: t, b: b, log: events.New(b.JetStream()), ctx: brokertest.Context(t)}
}

// run starts a runner for h and stops it when the test ends.
func (h *harness) run(handler Handler, opts Options) *Runner {
	h.t.Helper()
	if opts.AckWait == 0 {
		opts.AckWait = 3 * time.Second
	}
	r, err := NewRunner(h.b.JetStream(), handler, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("runner: %v", err)
		}
	})
	return r
}

func (h *harness) send(session, target string, text string) *schemas.Envelope {
	h.t.Helper()
	env, err := schemas.New(schemas.TypeUserInput, session, "user", target, time.Now(), schemas.UserInput{Text: text})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.log.Append(h.ctx, env); err != nil {
		h.t.Fatal(err)
	}
	return env
}

func (h *harness) signal(session, action, scope string) {
	h.t.Helper()
	env, _ := schemas.New(schemas.TypeSignal, session, "user", "orchestrator", time.Now(), schemas.Signal{Action: action, Scope: scope})
	if _, err := h.log.Append(h.ctx, env); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) events(subject string) []*events.Event {
	h.t.Helper()
	evs, err := h.log.Read(h.ctx, subject, events.Cursor{}, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func (h *harness) count(subject string) int { return len(h.events(subject)) }

func (h *harness) consumerIdle(agent string) bool {
	c, err := h.b.JetStream().Consumer(h.ctx, broker.Stream, ConsumerName(agent))
	if err != nil {
		return false
	}
	info, err := c.Info(h.ctx)
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0
}

// echo answers every user_input with a notice derived from it.
func echo(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
	p, err := schemas.PayloadAs[schemas.UserInput](d.Env)
	if err != nil {
		return nil, Permanent(err)
	}
	out, err := d.Derive(schemas.TypeNotice, "user", "echo", schemas.Notice{Level: schemas.NoticeInfo, Text: "echo: " + p.Text})
	return []*schemas.Envelope{out}, err
}

func TestRunnerAppendsOutputsThenAcks(t *testing.T) {
	h := newHarness(t)
	h.run(HandlerFunc(echo), Options{Agent: "echoer"})
	in := h.send("S1", "echoer", "hi")
	brokertest.Eventually(t, 10*time.Second, "echo notice appended and input acked", func() bool {
		return h.count(events.Filter{Type: schemas.TypeNotice}.Subject()) == 1 && h.consumerIdle("echoer")
	})
	out := h.events(events.Filter{Type: schemas.TypeNotice}.Subject())[0].Env
	if out.ParentID != in.ID || out.CorrelationID != in.CorrelationID || out.Source != "echoer" || out.ID != schemas.DeriveID(in, "echoer/echo") {
		t.Fatalf("output lineage: %+v", out)
	}
}

func TestRedeliveryDoesNotDuplicateOutputs(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	// The first delivery appends its output but "crashes" before the ack (a
	// transient error after the append); the redelivery derives the same ids.
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		outs, err := echo(ctx, d)
		if calls.Add(1) == 1 {
			for _, o := range outs {
				if _, err := d.Log().Append(ctx, o); err != nil {
					return nil, err
				}
			}
			return nil, Transient(errors.New("crash before ack"), time.Millisecond)
		}
		return outs, err
	}), Options{Agent: "echoer"})
	h.send("S1", "echoer", "once")
	brokertest.Eventually(t, 10*time.Second, "redelivered and acked", func() bool { return calls.Load() >= 2 && h.consumerIdle("echoer") })
	if n := h.count(events.Filter{Type: schemas.TypeNotice}.Subject()); n != 1 {
		t.Fatalf("%d notices after a redelivery, want 1", n)
	}
}

func TestTransientErrorsRetryThenDeadLetter(t *testing.T) {
	h := newHarness(t)
	var calls atomic.Int32
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		n := calls.Add(1)
		if d.Env.Type == schemas.TypeUserInput {
			p, _ := schemas.PayloadAs[schemas.UserInput](d.Env)
			if p.Text == "flaky" && n < 3 {
				return nil, Transient(errors.New("try again"), 0)
			}
			if p.Text == "hopeless" {
				return nil, Transient(errors.New("still down"), 0)
			}
		}
		return echo(ctx, d)
	}), Options{Agent: "worker", MaxDeliver: 3, Backoff: func(int) time.Duration { return 10 * time.Millisecond }})
	h.send("S1", "worker", "flaky")
	brokertest.Eventually(t, 10*time.Second, "flaky message handled on its third try", func() bool {
		return h.count(events.Filter{Type: schemas.TypeNotice}.Subject()) == 1
	})
	hopeless := h.send("S1", "worker", "hopeless")
	brokertest.Eventually(t, 10*time.Second, "hopeless message dead-lettered", func() bool {
		return h.count(events.Filter{Type: schemas.TypeDeadLetter}.Subject()) == 1 && h.consumerIdle("worker")
	})
	dl := h.events(events.Filter{Type: schemas.TypeDeadLetter}.Subject())[0].Env
	p, _ := schemas.PayloadAs[schemas.DeadLetter](dl)
	if p.Deliveries != 3 || p.Consumer != "agent-worker" || p.OriginalID != hopeless.ID || dl.SessionID != "S1" {
		t.Fatalf("dead_letter = %+v in %s", p, dl.SessionID)
	}
	m := h.dlq(t, "agent-worker", 1)[0]
	if m.Header.Get(HeaderDLQDeliveries) != "3" || m.Header.Get(events.HeaderType) != "user_input" || m.Header.Get(HeaderDLQReason) == "" {
		t.Fatalf("DLQ headers = %v", m.Header)
	}
	if got, _ := schemas.Unmarshal(m.Data); got == nil || got.ID != hopeless.ID {
		t.Fatal("DLQ message does not hold the original bytes")
	}
}

// dlq returns the DLQ's messages once it holds want of them, each checked to
// be consumer's.
func (h *harness) dlq(t *testing.T, consumer string, want int) []*jetstream.RawStreamMsg {
	s, err := h.b.JetStream().Stream(h.ctx, broker.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	// A dead letter is written by the runner that gave up, which may still be
	// at it when another message's handling is seen to end: poll.
	var info *jetstream.StreamInfo
	held := -1
	if !brokertest.Poll(10*time.Second, func() bool {
		if info, err = s.Info(h.ctx); err == nil {
			held = int(info.State.Msgs)
		}
		return held == want
	}) {
		t.Fatalf("DLQ holds %d messages, want %d (last error %v)", held, want, err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(h.ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != events.DLQSubject(consumer) {
			t.Fatalf("DLQ subject %s", m.Subject)
		}
		out = append(out, m)
	}
	return out
}

func TestPermanentErrorAndGarbageAreDeadLettered(t *testing.T) {
	h := newHarness(t)
	var handled atomic.Int32
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		handled.Add(1)
		return nil, errors.New("unclassified errors are permanent")
	}), Options{Agent: "worker"})
	h.send("S1", "worker", "x")
	if _, err := h.b.JetStream().Publish(h.ctx, "sylk.v1.S2.outsider.worker.user_input", []byte{0xc1, 0x00}); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "both dead-lettered", func() bool {
		return h.count(events.Filter{Type: schemas.TypeDeadLetter}.Subject()) == 2 && h.consumerIdle("worker")
	})
	if handled.Load() != 1 {
		t.Fatalf("handler called %d times, want once (never for garbage)", handled.Load())
	}
	msgs := h.dlq(t, "agent-worker", 2)
	reasons := msgs[0].Header.Get(HeaderDLQReason) + " | " + msgs[1].Header.Get(HeaderDLQReason)
	if !strings.Contains(reasons, "unclassified errors are permanent") || !strings.Contains(reasons, "invalid envelope") {
		t.Fatalf("reasons = %s", reasons)
	}
	// The garbage's dead_letter event lands in the system session.
	if n := h.count(events.Filter{Session: schemas.SystemSession, Type: schemas.TypeDeadLetter}.Subject()); n != 1 {
		t.Fatalf("%d dead letters in the system session, want 1", n)
	}
}

func TestPausedSessionIsHeldThenReleased(t *testing.T) {
	h := newHarness(t)
	h.signal("S1", schemas.SignalPause, schemas.ScopeSession) // before the runner starts: read on start-up
	h.run(HandlerFunc(echo), Options{Agent: "worker"})
	h.send("S1", "worker", "held")
	h.send("S2", "worker", "free")
	brokertest.Eventually(t, 10*time.Second, "S2 handled while S1 is paused", func() bool {
		return h.count(events.Filter{Session: "S2", Type: schemas.TypeNotice}.Subject()) == 1
	})
	if n := h.count(events.Filter{Session: "S1", Type: schemas.TypeNotice}.Subject()); n != 0 {
		t.Fatalf("paused session handled %d messages", n)
	}
	h.signal("S1", schemas.SignalResume, schemas.ScopeSession)
	brokertest.Eventually(t, 10*time.Second, "S1 released on resume", func() bool {
		return h.count(events.Filter{Session: "S1", Type: schemas.TypeNotice}.Subject()) == 1 && h.consumerIdle("worker")
	})
}

func TestCancelStopsRunningAndSkipsQueuedWork(t *testing.T) {
	h := newHarness(t)
	started := make(chan struct{}, 10)
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		started <- struct{}{}
		<-ctx.Done() // a long tool
		return nil, ctx.Err()
	}), Options{Agent: "worker", Concurrency: 1, PerSession: 1, SkipCancelled: true})
	h.send("S1", "worker", "long")
	h.send("S1", "worker", "queued")
	<-started
	h.signal("S1", schemas.SignalCancel, schemas.ScopeSession)
	brokertest.Eventually(t, 10*time.Second, "running work cancelled, queued work skipped", func() bool { return h.consumerIdle("worker") })
	if len(started) != 0 {
		t.Fatal("queued work of a cancelled session was started")
	}
	if n := h.count(events.Filter{Type: schemas.TypeDeadLetter}.Subject()); n != 1 {
		t.Fatalf("%d dead letters; the cancelled run must be recorded once", n)
	}
}

// One session with a backlog must not starve another: with one worker, the
// second session's message is handled long before the backlog is through.
func TestFairShareBetweenSessions(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var order []string
	release := make(chan struct{})
	// Released at the end whatever happens: a failed check below must not
	// leave the runner's stop waiting on a handler that waits for ever.
	releaseAll := sync.OnceFunc(func() { close(release) })
	r := h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		<-release
		mu.Lock()
		order = append(order, d.Env.SessionID)
		mu.Unlock()
		return nil, nil
	}), Options{Agent: "worker", Concurrency: 1, PerSession: 1})
	t.Cleanup(releaseAll)
	for i := range 20 {
		h.send("busy", "worker", strconv.Itoa(i))
	}
	h.send("quiet", "worker", "me too")
	// Every message in the runner's hands, one running and 20 queued, before
	// the handler goes on: the server's count of what it has delivered is not
	// enough, a delivered message can still wait in the client (under load in
	// a full parallel run the quiet one was queued only after ten were
	// handled). Within three pull expiries: one pull of the consumer once sat
	// until its expiry (pullExpiry, 10 s); this test checks the order of
	// handling, not fetch speed.
	brokertest.Eventually(t, 3*pullExpiry, "all in the runner's hands", func() bool {
		return len(r.sched.held()) == 21
	})
	releaseAll()
	brokertest.Eventually(t, 10*time.Second, "all handled", func() bool { return h.consumerIdle("worker") })
	mu.Lock()
	defer mu.Unlock()
	pos := -1
	for i, s := range order {
		if s == "quiet" {
			pos = i
		}
	}
	if pos < 0 || pos > 3 {
		t.Fatalf("quiet session handled at position %d of %d: %v", pos, len(order), order)
	}
}

func TestSuperviseRestartsWithinLimits(t *testing.T) {
	var runs int
	var restarts []string
	err := Supervise(context.Background(), "loop", RestartLimits{Max: 2, Period: time.Minute}, func(context.Context) error {
		runs++
		if runs == 2 {
			panic("boom")
		}
		return fmt.Errorf("failure %d", runs)
	}, func(n int, reason string) { restarts = append(restarts, reason) })
	if !errors.Is(err, ErrRestartLimit) || runs != 3 || len(restarts) != 2 || !strings.Contains(restarts[1], "panic: boom") {
		t.Fatalf("err=%v runs=%d restarts=%q", err, runs, restarts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Supervise(ctx, "loop", DefaultRestartLimits, func(ctx context.Context) error { return ctx.Err() }, nil); err != nil {
		t.Fatalf("cancelled supervisor returned %v", err)
	}
}

func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	var changes []string
	b := NewBreaker("subprocess", BreakerConfig{ConsecutiveFailures: 3, FailureRate: 0.5, Window: 4, Cooldown: 10 * time.Second, SuccessesToClose: 2},
		func() time.Time { return now }, func(c BreakerChange) { changes = append(changes, c.From+">"+c.To) })
	for range 3 {
		if _, err := b.Allow(); err != nil {
			t.Fatal(err)
		}
		b.Record(true)
	}
	if b.State() != BreakerOpen {
		t.Fatalf("state %s after 3 consecutive failures", b.State())
	}
	if wait, err := b.Allow(); !errors.Is(err, ErrBreakerOpen) || wait != 10*time.Second {
		t.Fatalf("open breaker allowed a call: %v %v", wait, err)
	}
	now = now.Add(11 * time.Second)
	if _, err := b.Allow(); err != nil {
		t.Fatalf("no probe after cooldown: %v", err)
	}
	if _, err := b.Allow(); !errors.Is(err, ErrBreakerOpen) {
		t.Fatal("a second probe went through while one is in flight")
	}
	b.Record(false)
	b.Allow()
	b.Record(false)
	if b.State() != BreakerClosed {
		t.Fatalf("state %s after 2 good probes", b.State())
	}
	// Rate trip: a full window at 50% failures, never 3 in a row.
	for _, f := range []bool{false, true, false, true} {
		b.Allow()
		b.Record(f)
	}
	if b.State() != BreakerOpen {
		t.Fatalf("state %s at 50%% failure rate", b.State())
	}
	want := "closed>open open>half_open half_open>closed closed>open"
	if got := fmt.Sprint(changes); got != "["+want+"]" {
		t.Fatalf("changes %s, want [%s]", got, want)
	}
}

// runTwo runs two processes of one agent kind, first on h's connection and
// second on a connection of its own, and returns once both are pulling from
// their shared consumer.
func (h *harness) runTwo(first, second Handler, opts Options) {
	h.t.Helper()
	h.run(first, opts)
	nc, err := h.b.NewConn("second")
	if err != nil {
		h.t.Fatal(err)
	}
	js2, _ := jetstream.New(nc)
	if opts.AckWait == 0 {
		opts.AckWait = 3 * time.Second
	}
	r2, err := NewRunner(js2, second, opts)
	if err != nil {
		nc.Close()
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- r2.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done; nc.Close() })
	brokertest.Eventually(h.t, 20*time.Second, "two runners pulling", func() bool {
		c, err := h.b.JetStream().Consumer(h.ctx, broker.Stream, ConsumerName(opts.Agent))
		if err != nil {
			return false
		}
		info, err := c.Info(h.ctx)
		return err == nil && info.NumWaiting >= 2
	})
}

// Two processes of one agent kind share its durable consumer: each message is
// handled once, by one of them, and both take part.
func TestRunnersOfOneKindShareTheWork(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	by := map[string]int{}
	seen := map[string]bool{}
	handler := func(name string) Handler {
		return HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
			mu.Lock()
			defer mu.Unlock()
			if seen[d.Env.ID] {
				t.Errorf("message %s handled twice", d.Env.ID)
			}
			seen[d.Env.ID] = true
			by[name]++
			return nil, nil
		})
	}
	h.runTwo(handler("first"), handler("second"), Options{Agent: "worker", Concurrency: 1, PerSession: 1})
	for i := range 40 {
		h.send(fmt.Sprintf("S%d", i%4), "worker", strconv.Itoa(i))
	}
	brokertest.Eventually(t, 20*time.Second, "all 40 handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 40 && h.consumerIdle("worker")
	})
	mu.Lock()
	defer mu.Unlock()
	if by["first"] == 0 || by["second"] == 0 {
		t.Fatalf("work split %v: both processes must take part", by)
	}
}

// A live process keeps its work however long it takes: a message handled for
// four ack waits is never handed to the other process of its kind, because
// the holder reports progress on it (the short ack wait only hands over the
// work of a process that stopped reporting).
func TestLiveProcessKeepsItsWorkPastTheAckWait(t *testing.T) {
	const ackWait = time.Second
	h := newHarness(t)
	var mu sync.Mutex
	var by []string
	handler := func(name string) Handler {
		return HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
			mu.Lock()
			by = append(by, name)
			mu.Unlock()
			// A tool that runs for four ack waits.
			select {
			case <-time.After(4 * ackWait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return echo(ctx, d)
		})
	}
	h.runTwo(handler("first"), handler("second"), Options{Agent: "worker", Concurrency: 1, PerSession: 1, AckWait: ackWait})
	h.send("S1", "worker", "long")
	brokertest.Eventually(t, 30*time.Second, "the long message handled and acked", func() bool {
		return h.count(events.Filter{Type: schemas.TypeNotice}.Subject()) == 1 && h.consumerIdle("worker")
	})
	mu.Lock()
	defer mu.Unlock()
	if len(by) != 1 {
		t.Fatalf("handled by %v: a live process's work was handed over", by)
	}
}
