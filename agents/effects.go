package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// ToolRunner runs tool calls: *tools.Executor.
type ToolRunner interface {
	Run(ctx context.Context, agent string, call tools.Call) (tools.Result, error)
}

// ObservingToolRunner is a ToolRunner that also hands every line a call's
// processes write, redacted and before truncation, to a function:
// *tools.Executor. RunToolObserved uses it when it is there.
type ObservingToolRunner interface {
	RunObserved(ctx context.Context, agent string, call tools.Call, onLine func(stream, line string)) (tools.Result, error)
}

// ToolObserver watches one tool call's output as it is written and adds what
// it derived from all of it (test counts over an output the result keeps only
// the head and tail of) to the recorded result, so a redelivery that reuses
// the record reuses that too.
type ToolObserver interface {
	// Line is called with each line, without its newline, of stream
	// (tools.StreamStdout or tools.StreamStderr), never concurrently.
	Line(stream, line string)
	// Data is called once the call has ended: a JSON object to record as
	// the result's Data, or nil.
	Data() json.RawMessage
}

// ToolRecords finds a tool call's recorded result: projections.Store. Not
// recorded is an error wrapping projections.ErrNotFound.
type ToolRecords interface {
	ToolResult(ctx context.Context, callID string) (*schemas.ToolResult, uint64, error)
}

// ToolWhere says which DAG node a tool call belongs to, for the records.
type ToolWhere struct {
	DAGID   string
	NodeID  string
	Attempt int
}

// RunTool runs call once across all deliveries of this message. If its result
// is recorded, it returns that and reused=true without running anything.
// Otherwise it appends a tool_call event, runs the tool (through the runner's
// subprocess circuit breaker), appends the tool_result event, and returns the
// result. A tool cut off because the runner is stopping records no result: it
// will run again on redelivery, after its tool_call. A refusal (unknown tool,
// permission denied, bad arguments) is recorded as a failed result too, so it
// is not retried.
func (d *Delivery) RunTool(ctx context.Context, exec ToolRunner, records ToolRecords, call tools.Call, where ToolWhere) (res schemas.ToolResult, reused bool, err error) {
	return d.RunToolObserved(ctx, exec, records, call, where, nil)
}

// RunToolObserved is RunTool with an observer of the call's output lines:
// when exec is an ObservingToolRunner and obs is not nil, obs sees every line
// and its Data is recorded as the result's Data (unless the tool returned
// data of its own). Without an ObservingToolRunner obs sees nothing.
func (d *Delivery) RunToolObserved(ctx context.Context, exec ToolRunner, records ToolRecords, call tools.Call, where ToolWhere, obs ToolObserver) (res schemas.ToolResult, reused bool, err error) {
	return d.runTool(ctx, exec, records, call, where, obs, false)
}

// RunToolLast is RunToolObserved for the call a handler makes last: nothing
// it does afterwards reads the result back from the stream or the
// projections (a DAG node's one call, reported to the Orchestrator). Its
// tool_call is appended before the tool runs, as always; its tool_result,
// unless it has audit records (those go with it in one atomic batch), is
// appended by the runner with the handler's outputs, pipelined ahead of
// them, or on its own before the handler's error if the handler fails: a
// round trip to the server less per call. A crash before it is stored runs
// the tool again on redelivery, as a crash before the result's own append
// did.
func (d *Delivery) RunToolLast(ctx context.Context, exec ToolRunner, records ToolRecords, call tools.Call, where ToolWhere, obs ToolObserver) (res schemas.ToolResult, reused bool, err error) {
	return d.runTool(ctx, exec, records, call, where, obs, true)
}

func (d *Delivery) runTool(ctx context.Context, exec ToolRunner, records ToolRecords, call tools.Call, where ToolWhere, obs ToolObserver, last bool) (res schemas.ToolResult, reused bool, err error) {
	rec, _, err := records.ToolResult(ctx, call.ID)
	switch {
	case err == nil:
		return *rec, true, nil
	case !errors.Is(err, projections.ErrNotFound):
		return res, false, Transient(fmt.Errorf("look up recorded result of %s: %w", call.ID, err), 0)
	}
	var args map[string]any
	if len(call.Args) > 0 {
		if err := json.Unmarshal(call.Args, &args); err != nil {
			return res, false, Permanent(fmt.Errorf("tool %s: arguments are not a JSON object: %w", call.Tool, err))
		}
	}
	started, err := d.Derive(schemas.TypeToolCall, "user", "", schemas.ToolCall{
		CallID: call.ID, Tool: call.Tool, Args: args, DAGID: where.DAGID, NodeID: where.NodeID, Attempt: where.Attempt,
	})
	if err != nil {
		return res, false, Permanent(err)
	}
	// Every run gets its own record, so the stream shows each one: a fresh id,
	// not a derived one. A delivery count would not do: a server killed before
	// it persisted the count redelivers with the same one.
	started.ID = schemas.NewID()
	if _, err := d.appendNow(ctx, started); err != nil {
		return res, false, err
	}

	breaker := d.runner.breaker("subprocess")
	if wait, err := breaker.Allow(); err != nil {
		return res, false, Transient(err, wait)
	}
	var out tools.Result
	var runErr error
	if ox, ok := exec.(ObservingToolRunner); ok && obs != nil {
		out, runErr = ox.RunObserved(ctx, d.Agent, call, obs.Line)
	} else {
		out, runErr = exec.Run(ctx, d.Agent, call)
	}
	// A tool cut off by the context left a partial result: recorded when a
	// signal or the node's timeout stopped it, not when the runner is stopping
	// (it runs again on redelivery).
	interrupted := runErr != nil && ctx.Err() != nil
	breaker.Record(runErr != nil && !interrupted && !tools.IsRefusal(runErr))
	if interrupted && d.runner.stopping(ctx) {
		return res, false, ctx.Err()
	}
	if runErr != nil && !interrupted {
		out = tools.Result{CallID: call.ID, Tool: call.Tool, ExitCode: -1, Error: runErr.Error()}
	} else if obs != nil && len(out.Data) == 0 {
		out.Data = obs.Data()
	}
	res = ToolResultOf(out)
	res.DAGID, res.NodeID, res.Attempt = where.DAGID, where.NodeID, where.Attempt
	done, err := d.Derive(schemas.TypeToolResult, "user", "tool_result/"+call.ID, res)
	if err != nil {
		return res, false, Permanent(err)
	}
	// The audit records of this run go in one atomic batch with its result:
	// a redelivery that finds the result recorded finds them too, and a run
	// cut off before both runs again with a tool_call, and so ids, of its
	// own.
	envs := []*schemas.Envelope{done}
	for _, a := range toolAudits(call, args, out, runErr) {
		rec, err := d.Derive(schemas.TypeAuditRecord, "user", "audit/"+a.key+"/"+call.ID, a.rec)
		if err != nil {
			return res, false, Permanent(err)
		}
		rec.ID = schemas.DeriveID(started, "audit/"+a.key)
		envs = append(envs, rec)
	}
	if last && len(envs) == 1 {
		d.deferResult(done)
		return res, false, nil
	}
	// Record even when a signal cancelled ctx: the result is what happened.
	if err := d.appendResult(context.WithoutCancel(ctx), envs); err != nil {
		return res, false, err
	}
	return res, false, nil
}

// appendResult appends a tool's result and its audit records, atomically
// when there are records. A result the stream holds already (a projection
// that trailed it let the call run again) is kept, with its records.
func (d *Delivery) appendResult(ctx context.Context, envs []*schemas.Envelope) error {
	if len(envs) == 1 {
		_, err := d.appendNow(ctx, envs[0])
		return err
	}
	_, err := d.runner.log.AppendBatch(ctx, envs)
	if err != nil && !errors.Is(err, events.ErrDuplicate) {
		return Transient(fmt.Errorf("record %s with its audit records: %w", envs[0].Type, err), 0)
	}
	return nil
}

// ToolResultOf is the event payload of a tool result.
func ToolResultOf(r tools.Result) schemas.ToolResult {
	return schemas.ToolResult{
		CallID: r.CallID, Tool: r.Tool, OK: r.OK, ExitCode: r.ExitCode, Signal: r.Signal, KillSignals: r.KillSignals,
		Output: r.Output, Stdout: r.Stdout, Stderr: r.Stderr, StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes,
		Truncated: r.Truncated, Partial: r.Partial, TimedOut: r.TimedOut, Canceled: r.Canceled,
		DurationMS: r.DurationMS, DurationUS: r.DurationUS, Summary: r.Summary, Error: r.Error, Data: string(r.Data),
	}
}
