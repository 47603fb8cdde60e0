package projections

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// Errors of the projections. Each is wrapped with the id at fault; check with
// errors.Is.
var (
	// ErrNotFound: no session, DAG, trace or record with that id.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition: the session's state does not allow the move.
	ErrIllegalTransition = errors.New("illegal session transition")
	// ErrAmbiguous: a DAG id names DAGs in several sessions.
	ErrAmbiguous = errors.New("ambiguous id")
	// ErrVerify: a rebuilt projection differs from the live one.
	ErrVerify = errors.New("projection differs from a rebuild")
	// ErrDiverged: the stored cursor points at an event the stream does not hold
	// (the stream was replaced or lost its tail).
	ErrDiverged = errors.New("projections diverged from the stream")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("store closed")
	// ErrInvalidQuery: a query contradicts itself or names something that
	// cannot exist (a history query both current_only and cross_session).
	ErrInvalidQuery = errors.New("invalid query")
)

// Move is what a session event asks of a session's state.
type Move string

// Moves, one per session event type.
const (
	MoveResume   Move = "resume"
	MoveSwitch   Move = "switch"
	MoveSuspend  Move = "suspend"
	MoveComplete Move = "complete"
	MoveFail     Move = "fail"
)

// MoveOf returns the move a session event type makes, if it is one.
func MoveOf(t schemas.Type) (Move, bool) {
	switch t {
	case schemas.TypeSessionResume:
		return MoveResume, true
	case schemas.TypeSessionSwitch:
		return MoveSwitch, true
	case schemas.TypeSessionSuspend:
		return MoveSuspend, true
	case schemas.TypeSessionComplete:
		return MoveComplete, true
	case schemas.TypeSessionFail:
		return MoveFail, true
	}
	return "", false
}

// transitions are the six legal transitions of seed L1867-1873, plus switching
// to a session that is already active, which only moves the focus.
var transitions = map[SessionState]map[Move]SessionState{
	StateCreated:   {MoveResume: StateActive, MoveSwitch: StateActive},
	StateActive:    {MoveSuspend: StateSuspended, MoveComplete: StateCompleted, MoveFail: StateFailed, MoveSwitch: StateActive},
	StateSuspended: {MoveResume: StateActive, MoveSwitch: StateActive, MoveComplete: StateCompleted},
	StateCompleted: {},
	StateFailed:    {},
}

// Allowed returns the moves a session in state s may make, in a fixed order.
func Allowed(s SessionState) []Move {
	var out []Move
	for _, m := range []Move{MoveResume, MoveSwitch, MoveSuspend, MoveComplete, MoveFail} {
		if _, ok := transitions[s][m]; ok {
			out = append(out, m)
		}
	}
	return out
}

// TransitionError is an illegal move: it names the session, its state and the
// moves it allows. It matches ErrIllegalTransition.
type TransitionError struct {
	Session string
	State   SessionState
	Move    Move
	Allowed []Move
}

func (e *TransitionError) Error() string {
	if len(e.Allowed) == 0 {
		return fmt.Sprintf("session %s is %s: cannot %s it (%s is final; nothing more can happen to it)", e.Session, e.State, e.Move, e.State)
	}
	moves := make([]string, len(e.Allowed))
	for i, m := range e.Allowed {
		moves[i] = string(m)
	}
	return fmt.Sprintf("session %s is %s: cannot %s it (allowed: %s)", e.Session, e.State, e.Move, strings.Join(moves, ", "))
}

// Is makes a TransitionError match ErrIllegalTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Next returns the state a session with id in state from reaches by move m, or
// a *TransitionError.
func Next(id string, from SessionState, m Move) (SessionState, error) {
	to, ok := transitions[from][m]
	if !ok {
		return from, &TransitionError{Session: id, State: from, Move: m, Allowed: Allowed(from)}
	}
	return to, nil
}

// Plan checks a DAG's structure and computes its layers by longest path: a node
// with no dependencies is in layer 0, any other one layer below its deepest
// dependency. problems lists every structural fault (bad or duplicate ids,
// unknown dependencies, cycles); layers is nil when there are any.
func Plan(d schemas.DAG) (layers [][]string, layerOf map[string]int, problems []string) {
	if !schemas.ValidName(d.ID) {
		problems = append(problems, fmt.Sprintf("dag id %q is not a name ([A-Za-z0-9_-]{1,64})", d.ID))
	}
	layers, shape := d.Shape()
	if problems = append(problems, shape...); len(problems) > 0 {
		return nil, nil, problems
	}
	layerOf = make(map[string]int, len(d.Nodes))
	for l, ids := range layers {
		for _, id := range ids {
			layerOf[id] = l
		}
	}
	return layers, layerOf, nil
}
