package projections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func appendToolResult(t *testing.T, ctx context.Context, log *events.Log, call string) uint64 {
	t.Helper()
	env, err := schemas.New(schemas.TypeToolResult, "S1", "engineer", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		schemas.ToolResult{CallID: call, Tool: "exec", OK: true, DAGID: "d", NodeID: "a", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := log.Append(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

// callsReady waits for the scan of the recorded calls Open started.
func callsReady(t *testing.T, s *Store) {
	t.Helper()
	brokertest.Eventually(t, 10*time.Second, "the calls filter is ready", s.calls.ready.Load)
}

// Once the filter knows the recorded calls, the calls recorded before the
// store opened and those folded since are found, and a call never recorded
// is not found without a read of Pebble.
func TestCallKeysKnowEveryRecordedCall(t *testing.T) {
	ctx, log, fs, s := setup(t)
	appendSession(t, ctx, log, "S1")
	appendToolResult(t, ctx, log, "before")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, ctx, fs, s)
	callsReady(t, s)
	seq := appendToolResult(t, ctx, log, "after")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"before", "after"} {
		if _, _, err := s.ToolResult(ctx, call); err != nil {
			t.Fatalf("tool result of %s: %v", call, err)
		}
	}
	if !s.calls.absent(toolCallKey("never")) {
		t.Fatal("the filter does not know that a call never recorded is absent")
	}
	if _, _, err := s.ToolResult(ctx, "never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tool result of a call never recorded: %v", err)
	}
	// The fold refuses a second record of a call it knows, by the filter's
	// maybe and Pebble's record.
	appendToolResult(t, ctx, log, "after")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if r, got, err := s.ToolResult(ctx, "after"); err != nil || got != seq || !r.OK {
		t.Fatalf("tool result of after: seq %d, %v; want the first record, seq %d", got, err, seq)
	}
}
