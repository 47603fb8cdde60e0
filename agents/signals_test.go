package agents

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/schemas"
)

// A signal may reach the state twice, or after a newer one (the signal tail
// and the runner's consumer race): the state is the newest signal's for each
// session, whatever the order of arrival.
func TestSignalStateKeepsTheNewestSignal(t *testing.T) {
	pause := func(seq uint64, session, scope string) signalEvent {
		return signalEvent{Seq: seq, Session: session, Action: schemas.SignalPause, Scope: scope}
	}
	resume := func(seq uint64, session, scope string) signalEvent {
		return signalEvent{Seq: seq, Session: session, Action: schemas.SignalResume, Scope: scope}
	}
	cancel := func(seq uint64, session, scope string) signalEvent {
		return signalEvent{Seq: seq, Session: session, Action: schemas.SignalCancel, Scope: scope}
	}
	all, one := schemas.ScopeAll, schemas.ScopeSession
	for _, c := range []struct {
		name      string
		arrivals  []signalEvent
		news      []bool
		pausedS1  bool
		pausedS2  bool
		cancelled uint64 // S1's work up to this seq is cancelled
	}{
		{"in order", []signalEvent{pause(1, "S1", one), resume(2, "S1", one)}, []bool{true, true}, false, false, 0},
		{"a pause after its resume", []signalEvent{resume(2, "S1", one), pause(1, "S1", one)}, []bool{true, false}, false, false, 0},
		{"twice", []signalEvent{pause(1, "S1", one), pause(1, "S1", one)}, []bool{true, false}, true, false, 0},
		{"a session's pause after everything resumed", []signalEvent{resume(5, "sys", all), pause(3, "S1", one)}, []bool{true, false}, false, false, 0},
		{"a pause of everything after its resume", []signalEvent{resume(5, "sys", all), pause(3, "sys", all)}, []bool{true, false}, false, false, 0},
		{"a resume of everything resumes sessions", []signalEvent{pause(1, "S1", one), resume(5, "sys", all), pause(6, "S2", one)}, []bool{true, true, true}, false, true, 0},
		{"a session resumed under a pause of everything", []signalEvent{pause(1, "sys", all), resume(2, "S1", one)}, []bool{true, true}, true, true, 0},
		{"an older cancel", []signalEvent{cancel(9, "S1", one), cancel(4, "S1", one), cancel(3, "sys", all)}, []bool{true, false, true}, false, false, 9},
		{"a cancel of everything", []signalEvent{cancel(4, "S1", one), cancel(12, "sys", all), cancel(7, "sys", all)}, []bool{true, true, false}, false, false, 12},
		{"an unknown action", []signalEvent{{Seq: 1, Session: "S1", Action: "explode", Scope: one}}, []bool{false}, false, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSignalState()
			for i, e := range c.arrivals {
				if news := s.apply(e); news != c.news[i] {
					t.Errorf("arrival %d (%+v): news %v, want %v", i, e, news, c.news[i])
				}
			}
			if got := s.isPaused("S1"); got != c.pausedS1 {
				t.Errorf("S1 paused %v, want %v", got, c.pausedS1)
			}
			if got := s.isPaused("S2"); got != c.pausedS2 {
				t.Errorf("S2 paused %v, want %v", got, c.pausedS2)
			}
			if c.cancelled > 0 && (!s.cancelled("S1", c.cancelled) || s.cancelled("S1", c.cancelled+1)) {
				t.Errorf("S1 cancelled up to %d: want exactly that", c.cancelled)
			}
			if c.cancelled == 0 && s.cancelled("S1", 1) {
				t.Error("S1 cancelled, want nothing cancelled")
			}
		})
	}
}

// A pause addressed to the agent holds the work behind it in the stream as
// soon as the runner's consumer brings it, without waiting for the signal
// tail: here there is no tail at all (the runner is not running), and the
// messages are pushed to its scheduler as its consumer would.
func TestPauseFromTheConsumerHoldsWhatFollowsIt(t *testing.T) {
	h := newHarness(t)
	r, err := NewRunner(h.b.JetStream(), HandlerFunc(echo), Options{Agent: "orchestrator"})
	if err != nil {
		t.Fatal(err)
	}
	h.signal(schemas.SystemSession, schemas.SignalPause, schemas.ScopeAll)
	h.send("S1", "orchestrator", "behind the pause")
	cons, err := h.b.JetStream().CreateOrUpdateConsumer(h.ctx, broker.Stream, jetstream.ConsumerConfig{FilterSubject: r.ConsumerConfig().FilterSubject, FilterSubjects: r.ConsumerConfig().FilterSubjects})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(2)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		r.sched.push(h.ctx, r, m)
		n++
	}
	if n != 2 {
		t.Fatalf("fetched %d messages, want the pause and the request", n)
	}
	if held := r.Held(); held != 1 {
		t.Fatalf("%d messages held, want the request behind the pause", held)
	}
	if j := r.sched.pick(r.signals); j == nil || j.env.Type != schemas.TypeSignal {
		t.Fatalf("runnable: %+v, want only the signal", j)
	}
	if j := r.sched.pick(r.signals); j != nil {
		t.Fatalf("runnable after the signal: %s, want the request held", j.env.Type)
	}
}
