package agents

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sylk/sylk/projections"
)

// Projections that do not catch up make CatchUp give the message back
// (Transient) instead of holding it; once they have, it returns.
func TestCatchUpGivesUpAsTransientThenSucceeds(t *testing.T) {
	h := newHarness(t)
	h.send("S1", "engineer", "one")
	store, err := projections.Open(h.ctx, projections.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// No projector runs yet: the store stays behind the stream.
	ctx, cancel := context.WithTimeout(h.ctx, 200*time.Millisecond)
	defer cancel()
	err = CatchUp(ctx, h.log, store)
	if class, _ := Classify(h.ctx, err); class != ClassTransient || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CatchUp behind the stream: %v (class %v), want a transient deadline error", err, class)
	}

	if _, err := store.Projector(h.log).CatchUp(h.ctx); err != nil {
		t.Fatal(err)
	}
	if err := CatchUp(h.ctx, h.log, store); err != nil {
		t.Fatalf("CatchUp once the projections hold the stream: %v", err)
	}
}
