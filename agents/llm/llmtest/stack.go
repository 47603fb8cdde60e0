package llmtest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Stack is what agents run on in a test: a real embedded broker, the
// projections store (in memory) with its projector following the stream, and
// runners started with Run. Everything stops when the test ends.
type Stack struct {
	t      testing.TB
	Ctx    context.Context
	Broker *broker.Broker
	Log    *events.Log
	Store  *projections.Store
}

// NewStack starts a stack for t.
func NewStack(t testing.TB) *Stack {
	t.Helper()
	return newStack(t, projections.Options{Dir: "projections", FS: vfs.NewMem()})
}

// NewDiskStack is NewStack with the projections store on disk, in a
// temporary directory, as `sylk serve` keeps it: for benchmarks. An
// in-memory store copies its whole write-ahead log each time the log
// outgrows its buffer, a cost no real store has.
func NewDiskStack(t testing.TB) *Stack {
	t.Helper()
	return newStack(t, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
}

func newStack(t testing.TB, opts projections.Options) *Stack {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	store, err := projections.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	log := events.New(b.JetStream())
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.Projector(log).Run(pctx) }()
	t.Cleanup(func() {
		stop()
		<-done
		store.Close()
	})
	return &Stack{t: t, Ctx: ctx, Broker: b, Log: log, Store: store}
}

// JetStream is the broker's JetStream.
func (s *Stack) JetStream() jetstream.JetStream { return s.Broker.JetStream() }

// Run runs h as agent (consumer agent-<agent>, caught up with the store on
// redelivery) until the test ends or stop is called; opts adjust the
// runner's options.
func (s *Stack) Run(agent string, h agents.Handler, opts ...func(*agents.Options)) (stop func()) {
	s.t.Helper()
	o := agents.Options{Agent: agent, Caught: s.Store, AckWait: 10 * time.Second, Backoff: agents.Backoff(10*time.Millisecond, 100*time.Millisecond)}
	for _, f := range opts {
		f(&o)
	}
	r, err := agents.NewRunner(s.JetStream(), h, o)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(s.Ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				s.t.Errorf("runner %s: %v", agent, err)
			}
		})
	}
	s.t.Cleanup(stop)
	return stop
}

// Forget deletes agent's durable consumer (its runner stopped): the next
// runner of agent is handed every message again from the start, as in a
// replay of the whole stream.
func (s *Stack) Forget(agent string) {
	s.t.Helper()
	if err := s.JetStream().DeleteConsumer(s.Ctx, broker.Stream, agents.ConsumerName(agent)); err != nil {
		s.t.Fatal(err)
	}
}

// Send appends an event of type typ from source to target in session.
func (s *Stack) Send(session, source, target string, typ schemas.Type, payload any) *schemas.Envelope {
	s.t.Helper()
	env, err := schemas.New(typ, session, source, target, time.Now(), payload)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.Log.Append(s.Ctx, env); err != nil {
		s.t.Fatal(err)
	}
	return env
}

// Events returns every event of type typ (all types if ""), in stream order.
func (s *Stack) Events(typ schemas.Type) []*schemas.Envelope {
	s.t.Helper()
	evs, err := s.Log.Read(s.Ctx, events.Filter{Type: typ}.Subject(), events.Cursor{}, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	out := make([]*schemas.Envelope, 0, len(evs))
	for _, e := range evs {
		if e.Env != nil {
			out = append(out, e.Env)
		}
	}
	return out
}

// Count is the number of events of type typ.
func (s *Stack) Count(typ schemas.Type) int { return len(s.Events(typ)) }

// Payloads decodes every event of type typ as P.
func Payloads[P any](s *Stack, typ schemas.Type) []*P {
	s.t.Helper()
	var out []*P
	for _, e := range s.Events(typ) {
		p, err := schemas.PayloadAs[P](e)
		if err != nil {
			s.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// Idle reports whether agent's consumer has nothing pending or unacked.
func (s *Stack) Idle(agent string) bool {
	c, err := s.JetStream().Consumer(s.Ctx, broker.Stream, agents.ConsumerName(agent))
	if err != nil {
		return false
	}
	info, err := c.Info(s.Ctx)
	return err == nil && info.NumPending == 0 && info.NumAckPending == 0
}

// Eventually polls cond until it holds, failing the test after within.
func (s *Stack) Eventually(within time.Duration, msg string, cond func() bool) {
	s.t.Helper()
	brokertest.Eventually(s.t, within, msg, cond)
}

// Census counts the stream's events by type, as "type=n " in the
// catalogue's order: two censuses differ when anything was appended between
// them (a replay that should append nothing).
func (s *Stack) Census() string {
	counts := map[schemas.Type]int{}
	for _, e := range s.Events("") {
		counts[e.Type]++
	}
	var b strings.Builder
	for _, t := range schemas.Types() {
		if counts[t] > 0 {
			fmt.Fprintf(&b, "%s=%d ", t, counts[t])
		}
	}
	return b.String()
}
