package agents

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/schemas"
)

// notices returns n notices of session s.
func notices(t *testing.T, s string, n int) []*schemas.Envelope {
	t.Helper()
	var out []*schemas.Envelope
	for i := range n {
		env, err := schemas.New(schemas.TypeNotice, s, "user", "guide", time.Now(), schemas.Notice{Level: schemas.NoticeInfo, Text: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// queued starts an append of each list while an append is in flight (the
// leader's flag held), the first under ctx, the others under the test's,
// waits until all are queued, then drains the queue: what a runner does when
// handlers finish during a commit. It returns each append's outcome in order.
func queued(t *testing.T, h *harness, g *groupCommit, ctx context.Context, lists ...[]*schemas.Envelope) []error {
	t.Helper()
	g.mu.Lock()
	g.leading = true
	g.mu.Unlock()
	type outcome struct {
		last uint64
		err  error
	}
	results := make([]chan outcome, len(lists))
	for i, envs := range lists {
		results[i] = make(chan outcome, 1)
		actx := h.ctx
		if i == 0 {
			actx = ctx
		}
		go func() {
			last, err := g.append(actx, envs)
			results[i] <- outcome{last, err}
		}()
		// Queue them in order: each is in before the next starts.
		brokertest.Eventually(t, 10*time.Second, "queued", func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.queue) == i+1
		})
	}
	go g.drain()
	errs := make([]error, len(lists))
	for i, envs := range lists {
		o := <-results[i]
		errs[i] = o.err
		if o.err != nil {
			continue
		}
		ev, err := h.log.Get(h.ctx, o.last)
		if err != nil {
			t.Fatal(err)
		}
		if want := envs[len(envs)-1].ID; ev.Env.ID != want {
			t.Errorf("append %d: last sequence %d holds %s, want its last event %s", i, o.last, ev.Env.ID, want)
		}
	}
	return errs
}

// batchOf is the atomic batch id the stream stored the event at seq with.
func batchOf(t *testing.T, h *harness, seq uint64) string {
	t.Helper()
	ev, err := h.log.Get(h.ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	return nats.Header(ev.Header).Get("Nats-Batch-Id")
}

// Outputs queued during a commit are stored by the next one, together: one
// atomic batch (one sync), each handler told its own last sequence.
func TestGroupCommitSharesABatch(t *testing.T) {
	h := newHarness(t)
	g := &groupCommit{log: h.log, shared: true, minShared: 2}
	for i, err := range queued(t, h, g, h.ctx, notices(t, "a", 2), notices(t, "b", 1), notices(t, "c", 3)) {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	evs := h.events("sylk.v1.>")
	if len(evs) != 6 {
		t.Fatalf("%d events stored, want 6", len(evs))
	}
	first := batchOf(t, h, evs[0].Seq)
	if first == "" {
		t.Fatal("the queued outputs were not stored as an atomic batch")
	}
	for _, ev := range evs[1:] {
		if b := batchOf(t, h, ev.Seq); b != first {
			t.Errorf("event %d stored in batch %q, the first in %q: want one batch", ev.Seq, b, first)
		}
	}
	// A lone handler's outputs take the pipelined path: no batch.
	last, err := g.append(h.ctx, notices(t, "d", 2))
	if err != nil {
		t.Fatal(err)
	}
	if b := batchOf(t, h, last); b != "" {
		t.Errorf("a lone handler's event was stored in batch %q", b)
	}
}

// A queue shorter than sharedMin is appended pipelined, each event on its
// own: a shared batch's staging would cost its handlers more than it saves.
func TestGroupCommitPipelinesAShortQueue(t *testing.T) {
	h := newHarness(t)
	g := &groupCommit{log: h.log, shared: true}
	lists := [][]*schemas.Envelope{notices(t, "a", 2), notices(t, "b", 1), notices(t, "c", 3)}
	for i, err := range queued(t, h, g, h.ctx, lists...) {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	evs := h.events("sylk.v1.>")
	if len(evs) != 6 {
		t.Fatalf("%d events stored, want 6", len(evs))
	}
	for _, ev := range evs {
		if b := batchOf(t, h, ev.Seq); b != "" {
			t.Errorf("event %d of a queue of %d (< %d) stored in batch %q", ev.Seq, len(lists), sharedMin, b)
		}
	}
}

// A shared batch holding an event the stream has already (a redelivery
// after a crash) is refused whole; each handler's outputs are then appended
// on their own, the duplicate dropped, nothing else lost.
func TestGroupCommitFallsBackWhenTheBatchIsRefused(t *testing.T) {
	h := newHarness(t)
	g := &groupCommit{log: h.log, shared: true, minShared: 2}
	again := notices(t, "a", 2)
	if _, err := g.append(h.ctx, again[:1]); err != nil {
		t.Fatal(err)
	}
	other := notices(t, "b", 2)
	for i, err := range queued(t, h, g, h.ctx, again, other) {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	evs := h.events("sylk.v1.>")
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.Env.ID)
	}
	want := []string{again[0].ID, again[1].ID, other[0].ID, other[1].ID}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v (each once)", ids, want)
	}
}

// A handler that gives up waiting (a signal cancelled it) while its outputs
// lead a shared batch does not take the others' append down with it.
func TestGroupCommitOutlivesACancelledHandler(t *testing.T) {
	h := newHarness(t)
	g := &groupCommit{log: h.log, shared: true, minShared: 2}
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	mine, other := notices(t, "a", 1), notices(t, "b", 2)
	errs := queued(t, h, g, ctx, mine, other)
	if !errors.Is(errs[0], context.Canceled) {
		t.Errorf("the cancelled handler's append = %v, want it cancelled", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("the other handler's append failed with the cancelled one: %v", errs[1])
	}
	if n := h.count("sylk.v1.>"); n != 3 {
		t.Fatalf("%d events stored, want 3 (the batch is stored whole)", n)
	}
}
