package agents

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// countingTool is a tool whose runs are counted.
type countingTool struct{ runs atomic.Int32 }

func (c *countingTool) Run(_ context.Context, _ string, call tools.Call) (tools.Result, error) {
	c.runs.Add(1)
	return tools.Result{CallID: call.ID, Tool: call.Tool, OK: true, Output: "ran"}, nil
}

// RunToolLast leaves the result to the runner: appended between the
// tool_call and the handler's outputs, and appended too when the handler
// fails after the call, so the redelivery reuses it and the tool runs once.
func TestRunToolLastRecordsTheResultWithTheOutputsOrOnFailure(t *testing.T) {
	h := newHarness(t)
	store, err := projections.Open(h.ctx, projections.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pctx, stop := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { defer close(done); store.Projector(h.log).Run(pctx) }()
	defer func() { stop(); <-done }()

	tool := &countingTool{}
	var reused atomic.Bool
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		call := tools.Call{ID: tools.CallID(d.Env.ID, "n1"), Tool: "list", Args: []byte(`{"path":"."}`)}
		_, again, err := d.RunToolLast(ctx, tool, store, call, ToolWhere{}, nil)
		if err != nil {
			return nil, err
		}
		if d.Attempt == 1 {
			return nil, Transient(errors.New("fails after its tool ran"), 10*time.Millisecond)
		}
		reused.Store(again)
		return echo(ctx, d)
	}), Options{Agent: "echoer", Caught: store})
	h.send("S1", "echoer", "hi")

	brokertest.Eventually(t, 10*time.Second, "notice appended and input acked", func() bool {
		return h.count(events.Filter{Type: schemas.TypeNotice}.Subject()) == 1 && h.consumerIdle("echoer")
	})
	if n := tool.runs.Load(); n != 1 || !reused.Load() {
		t.Fatalf("tool ran %d times, result reused %v: want once, reused by the redelivery", n, reused.Load())
	}
	var types []schemas.Type
	for _, ev := range h.events(events.Filter{Session: "S1"}.Subject()) {
		types = append(types, ev.Env.Type)
	}
	want := []schemas.Type{schemas.TypeUserInput, schemas.TypeToolCall, schemas.TypeToolResult, schemas.TypeNotice}
	if !slices.Equal(types, want) {
		t.Fatalf("session's events %v, want %v", types, want)
	}
}
