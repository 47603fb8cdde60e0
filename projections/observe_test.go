package projections_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// observed records what an observer was handed.
type observed struct {
	mu   sync.Mutex
	seen []string
}

func (o *observed) fn(ev *events.Event, payload any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case ev.Env != nil:
		o.seen = append(o.seen, fmt.Sprintf("%d %s %s %T", ev.Seq, ev.Subject, ev.Env.Type, payload))
	case ev.Err != nil:
		o.seen = append(o.seen, fmt.Sprintf("%d %s invalid", ev.Seq, ev.Subject))
	default:
		o.seen = append(o.seen, fmt.Sprintf("%d %s neither decoded nor refused", ev.Seq, ev.Subject))
	}
}

func (o *observed) got() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.seen)
}

// line is what an observer should be handed for the stored event ev.
func line(ev *events.Event) string {
	if ev.Err != nil {
		return fmt.Sprintf("%d %s invalid", ev.Seq, ev.Subject)
	}
	p, _ := schemas.NewPayload(ev.Env.Type)
	return fmt.Sprintf("%d %s %s %T", ev.Seq, ev.Subject, ev.Env.Type, p)
}

// TestObserveHandsEachEventOnceDecoded: an observer gets every event after
// its start that the projector reads, in order and once, with its subject
// and the envelope and payload the projector decoded (or why the bytes are
// none), whether the projector read it in bulk while catching up (no
// subject in the read) or live; a rebuild hands nothing again; an observer
// started while the projector runs starts after what it has read; stop
// stops it. Received is the last event the projector read.
func TestObserveHandsEachEventOnceDecoded(t *testing.T) {
	w := newWorld(t)
	first := sessionsOf(t, w.ctx, w.log, "old", 1) // seqs 1, 2: before the start
	sessionsOf(t, w.ctx, w.log, "caught", 2)       // 3-6: read in the catch-up
	var o observed
	start, stop := w.store.Observe(first, o.fn)
	if start != first {
		t.Fatalf("start = %d, want %d (the projector has read nothing)", start, first)
	}
	if got := w.store.Received(); got != 0 {
		t.Fatalf("Received = %d before the projector ran, want 0", got)
	}
	p := w.store.Projector(w.log)
	w.follow(p)
	if err := w.store.WaitFor(w.ctx, first+4); err != nil {
		t.Fatal(err)
	}
	live := sessionsOf(t, w.ctx, w.log, "live", 1)
	last, err := w.js.Publish(w.ctx, "sylk.v1.S9.user.guide.user_input", []byte("not an envelope"))
	if err != nil {
		t.Fatal(err)
	}
	if last.Sequence != live+1 {
		t.Fatalf("the bytes are at %d, want %d", last.Sequence, live+1)
	}
	if err := w.store.WaitFor(w.ctx, last.Sequence); err != nil {
		t.Fatal(err)
	}
	if got := w.store.Received(); got != last.Sequence {
		t.Fatalf("Received = %d with every event folded, want the last, %d", got, last.Sequence)
	}
	stored, err := w.log.Read(w.ctx, events.Prefix+".>", events.Cursor{Seq: first + 1}, last.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ev := range stored {
		want = append(want, line(ev))
	}
	if o.got() != fmt.Sprint(want) {
		t.Fatalf("observed\n %s\nwant\n %s", o.got(), want)
	}

	// A rebuild reads everything again: nothing is handed twice, and what
	// comes after it is handed once.
	if err := p.Rebuild(w.ctx, nil); err != nil {
		t.Fatal(err)
	}
	after := sessionsOf(t, w.ctx, w.log, "after", 1)
	if err := w.store.WaitFor(w.ctx, after); err != nil {
		t.Fatal(err)
	}
	more, err := w.log.Read(w.ctx, events.Prefix+".>", events.Cursor{Seq: last.Sequence + 1}, after)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range more {
		want = append(want, line(ev))
	}
	if o.got() != fmt.Sprint(want) {
		t.Fatalf("after a rebuild, observed\n %s\nwant\n %s", o.got(), want)
	}

	// A second observer, started from 0 while the projector runs, starts
	// after the last event the projector read; the first, stopped, gets
	// nothing more.
	var o2 observed
	start2, stop2 := w.store.Observe(0, o2.fn)
	defer stop2()
	if start2 != after {
		t.Fatalf("an observer started at the head starts at %d, want %d", start2, after)
	}
	stop()
	next := appendAll(t, w.ctx, w.log, mustEnv(t, "after0", schemas.TypeSessionSuspend, schemas.SessionSuspend{}))
	if err := w.store.WaitFor(w.ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := o2.got(); got != fmt.Sprintf("[%d sylk.v1.after0.user.guide.session_suspend session_suspend *schemas.SessionSuspend]", next) {
		t.Errorf("the second observer got %s", got)
	}
	if o.got() != fmt.Sprint(want) {
		t.Errorf("the stopped observer got more: %s", o.got())
	}
}
