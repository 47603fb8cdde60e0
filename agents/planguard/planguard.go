// Package planguard keeps a session in plan mode read-only: while its plan is
// explored, drafted or awaits approval (seed L34842-34875), the agents may
// read and consult, and every call that would change the work directory
// (writes, edits, git commits, exec of anything but a read-only program) is
// refused with a reason the model reads as the tool's result. Once the plan is
// approved its DAG runs with the agents' usual permissions.
package planguard

import (
	"context"
	"errors"
	"fmt"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// State reads a session's plan mode: *projections.Store.
type State interface {
	PlanMode(ctx context.Context, session string) (*projections.PlanMode, error)
}

// Guarded is an executor that checks each call against its session's plan
// mode, read when it was made, before running it. It is an agents.ToolRunner
// and an agents.ObservingToolRunner.
type Guarded struct {
	exec *tools.Executor
	// why is the reason every call must be read-only ("": any call runs).
	why string
}

// Wrap guards exec with the plan mode session is in now; a nil state guards
// nothing. The state is read here, before the caller records the call's
// start, so nothing slow sits between that record and the run.
func Wrap(ctx context.Context, exec *tools.Executor, state State, session string) (*Guarded, error) {
	g := &Guarded{exec: exec}
	if state == nil {
		return g, nil
	}
	pm, err := state.PlanMode(ctx, session)
	switch {
	case errors.Is(err, projections.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("plan mode of session %s: %w", session, err)
	case schemas.PlanReadOnly(pm.State):
		g.why = fmt.Sprintf("session %s is in plan mode (%s): until the plan is approved the agents may only read and consult", session, pm.State)
	}
	return g, nil
}

// WrapCall is Wrap for one known call: a call that changes nothing runs in
// any plan mode, so only a call that may change something reads the
// session's plan mode (a DAG of read-only tool nodes reads it for none).
func WrapCall(ctx context.Context, exec *tools.Executor, state State, session string, call tools.Call) (*Guarded, error) {
	if ok, _ := exec.ReadOnlyCall(call); ok {
		return &Guarded{exec: exec}, nil
	}
	return Wrap(ctx, exec, state, session)
}

// ReadOnly guards exec so that only calls that change nothing run, for why
// ("answering a consultation").
func ReadOnly(exec *tools.Executor, why string) *Guarded {
	return &Guarded{exec: exec, why: why + " is read-only"}
}

// Run runs call unless the guard refuses it.
func (g *Guarded) Run(ctx context.Context, agent string, call tools.Call) (tools.Result, error) {
	if err := g.Check(call); err != nil {
		return tools.Result{}, err
	}
	return g.exec.Run(ctx, agent, call)
}

// RunObserved is Run with an observer of the output lines.
func (g *Guarded) RunObserved(ctx context.Context, agent string, call tools.Call, onLine func(stream, line string)) (tools.Result, error) {
	if err := g.Check(call); err != nil {
		return tools.Result{}, err
	}
	return g.exec.RunObserved(ctx, agent, call, onLine)
}

// Check returns an error wrapping tools.ErrPermissionDenied when calls must
// be read-only and call would change something.
func (g *Guarded) Check(call tools.Call) error {
	if g.why == "" {
		return nil
	}
	if ok, why := g.exec.ReadOnlyCall(call); !ok {
		return fmt.Errorf("%w: %s; %s. Read what you need, consult the other agents, and put the change into the plan instead",
			tools.ErrPermissionDenied, g.why, why)
	}
	return nil
}
