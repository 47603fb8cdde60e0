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
// mode before running it. It is an agents.ToolRunner and an
// agents.ObservingToolRunner.
type Guarded struct {
	exec    *tools.Executor
	state   State
	session string
	// always is the reason every call must be read-only, whatever the
	// session's plan mode ("" : only plan mode decides).
	always string
}

// Wrap guards exec for session; a nil state guards nothing.
func Wrap(exec *tools.Executor, state State, session string) *Guarded {
	return &Guarded{exec: exec, state: state, session: session}
}

// ReadOnly guards exec so that only calls that change nothing run, for why
// ("answering a consultation").
func ReadOnly(exec *tools.Executor, why string) *Guarded {
	return &Guarded{exec: exec, always: why}
}

// Run runs call unless plan mode refuses it.
func (g *Guarded) Run(ctx context.Context, agent string, call tools.Call) (tools.Result, error) {
	if err := g.Check(ctx, call); err != nil {
		return tools.Result{}, err
	}
	return g.exec.Run(ctx, agent, call)
}

// RunObserved is Run with an observer of the output lines.
func (g *Guarded) RunObserved(ctx context.Context, agent string, call tools.Call, onLine func(stream, line string)) (tools.Result, error) {
	if err := g.Check(ctx, call); err != nil {
		return tools.Result{}, err
	}
	return g.exec.RunObserved(ctx, agent, call, onLine)
}

// Check returns an error wrapping tools.ErrPermissionDenied when the session
// is in a read-only plan-mode state and call would change something.
func (g *Guarded) Check(ctx context.Context, call tools.Call) error {
	if g.always != "" {
		if ok, why := g.exec.ReadOnlyCall(call); !ok {
			return fmt.Errorf("%w: %s is read-only: %s", tools.ErrPermissionDenied, g.always, why)
		}
		return nil
	}
	if g.state == nil {
		return nil
	}
	pm, err := g.state.PlanMode(ctx, g.session)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("plan mode of session %s: %w", g.session, err)
	case !schemas.PlanReadOnly(pm.State):
		return nil
	}
	ok, why := g.exec.ReadOnlyCall(call)
	if ok {
		return nil
	}
	return fmt.Errorf("%w: session %s is in plan mode (%s): until the plan is approved the agents may only read and consult; %s. "+
		"Read what you need, consult the other agents, and put the change into the plan instead", tools.ErrPermissionDenied, g.session, pm.State, why)
}
