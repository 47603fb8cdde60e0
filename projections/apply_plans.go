package projections

import (
	"slices"
	"strconv"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// PlanStepNode is the DAG node id of step n (1-based) of a plan-mode plan.
func PlanStepNode(n int) string { return "step-" + strconv.Itoa(n) }

// planStepOf is the 1-based step of a plan-mode DAG node, or 0.
func planStepOf(node string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(node, "step-"))
	if err != nil || !strings.HasPrefix(node, "step-") {
		return 0
	}
	return n
}

// applyPlans folds a session's plan mode (seed L34877-34940): entering and
// leaving it, the Architect's drafts, the plans it puts to the user (each a
// version), the user's answers, and the approved plan's DAG as it runs, step by
// step. A move the state does not allow is refused with the state named. A
// user_input that arrives while a plan awaits approval is held (the Guide
// answers it later); its released copy (parent = the held one) ends the hold.
func applyPlans(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.SessionID == schemas.SystemSession {
		return nil
	}
	switch env.Type {
	case schemas.TypePlanEnter, schemas.TypePlanExit, schemas.TypePlanDraft, schemas.TypePlanExplore,
		schemas.TypePlanResponse, schemas.TypePlanApproved, schemas.TypePlanModified, schemas.TypeDAGExecute,
		schemas.TypeTaskDispatch, schemas.TypeTaskComplete, schemas.TypeTaskFailed, schemas.TypeNodeRetry,
		schemas.TypeNodeSkipped, schemas.TypeWorkflowComplete, schemas.TypeUserInput:
	default:
		return nil
	}
	k := planKey(env.SessionID)
	s, err := load[PlanMode](t, k)
	if err != nil {
		return err
	}
	if s == nil {
		if env.Type != schemas.TypePlanEnter && env.Type != schemas.TypePlanExit {
			return nil // never in plan mode: the plain plan flow
		}
		s = &PlanMode{Session: env.SessionID, State: schemas.PlanIdle}
	}
	changed, err := foldPlan(t, ev, s)
	if err != nil || !changed {
		return err
	}
	s.Seq = ev.seq
	store(t, k, s)
	return nil
}

// foldPlan applies one event to a session's plan mode and says whether it
// changed it.
func foldPlan(t *tx, ev *event, s *PlanMode) (bool, error) {
	env := ev.env
	move := func(to string) {
		s.Transitions = append(s.Transitions, PlanTransition{Seq: ev.seq, From: s.State, To: to, Event: env.Type})
		s.State = to
	}
	refuse := func(format string, args ...any) (bool, error) { return false, t.reject(Plans, ev, format, args...) }
	switch env.Type {
	case schemas.TypePlanEnter:
		switch s.State {
		case schemas.PlanIdle, schemas.PlanCompleted, schemas.PlanFailed:
		default:
			return refuse("session %s is already in plan mode (%s)", s.Session, s.State)
		}
		*s = PlanMode{Session: s.Session, State: s.State, Transitions: s.Transitions}
		move(schemas.PlanExploring)
	case schemas.TypePlanExit:
		switch s.State {
		case schemas.PlanIdle:
			return refuse("plan mode is off in session %s", s.Session)
		case schemas.PlanAwaitingApproval:
			return refuse("plan %s awaits approval in session %s: approve, modify or reject it first", s.PlanID, s.Session)
		case schemas.PlanApprovedState, schemas.PlanExecuting:
			return refuse("plan %s is running in session %s: cancel it first (sylk signal cancel --session %s)", s.PlanID, s.Session, s.Session)
		}
		move(schemas.PlanIdle)
	case schemas.TypePlanDraft:
		if s.State != schemas.PlanExploring {
			return refuse("no plan is being explored in session %s (%s)", s.Session, s.State)
		}
		move(schemas.PlanDrafting)
	case schemas.TypePlanExplore:
		if s.State != schemas.PlanDrafting {
			return refuse("no plan is being drafted in session %s (%s)", s.Session, s.State)
		}
		move(schemas.PlanExploring)
	case schemas.TypePlanResponse:
		p, err := payloadOf[schemas.PlanResponse](t, Plans, ev)
		if p == nil || p.Mode == nil {
			return false, err
		}
		if s.State != schemas.PlanExploring && s.State != schemas.PlanDrafting {
			return refuse("plan %s: session %s is not exploring or drafting a plan (%s)", p.PlanID, s.Session, s.State)
		}
		v := PlanVersion{Version: len(s.Versions) + 1, PlanID: p.PlanID, Seq: ev.seq, At: env.Timestamp, Plan: *p.Mode, Rationale: p.Rationale}
		s.Versions = append(s.Versions, v)
		s.PlanID, s.Version = p.PlanID, v.Version
		s.Steps = repeat(schemas.StepPending, len(p.Mode.Steps))
		s.Todos = repeat(schemas.StepPending, len(p.Mode.Todos))
		move(schemas.PlanAwaitingApproval)
	case schemas.TypePlanApproved, schemas.TypePlanModified:
		return settlePlan(t, ev, s, move)
	case schemas.TypeDAGExecute:
		p, err := payloadOf[schemas.DAGExecute](t, Plans, ev)
		if p == nil || p.DAG.ID != s.PlanID || s.PlanID == "" {
			return false, err
		}
		if s.State != schemas.PlanApprovedState {
			return refuse("plan %s is not approved (%s)", s.PlanID, s.State)
		}
		s.DAGID = p.DAG.ID
		move(schemas.PlanExecuting)
	case schemas.TypeUserInput:
		return holdInput(t, ev, s)
	default:
		return progress(t, ev, s, move)
	}
	return true, nil
}

// settlePlan applies the user's answer to the plan awaiting approval.
func settlePlan(t *tx, ev *event, s *PlanMode, move func(string)) (bool, error) {
	var id, feedback string
	rejected := false
	if ev.env.Type == schemas.TypePlanApproved {
		p, err := payloadOf[schemas.PlanApproved](t, Plans, ev)
		if p == nil {
			return false, err
		}
		id = p.PlanID
	} else {
		p, err := payloadOf[schemas.PlanModified](t, Plans, ev)
		if p == nil {
			return false, err
		}
		id, feedback, rejected = p.PlanID, p.Feedback, p.Rejected
	}
	if !slices.ContainsFunc(s.Versions, func(v PlanVersion) bool { return v.PlanID == id }) {
		return false, nil // a plan of the plain flow
	}
	if s.State != schemas.PlanAwaitingApproval || id != s.PlanID {
		return false, t.reject(Plans, ev, "plan %s is not awaiting approval in session %s (%s; the current plan is %s, version %d)",
			id, s.Session, s.State, s.PlanID, s.Version)
	}
	v := &s.Versions[len(s.Versions)-1]
	v.AnswerSeq, v.Feedback = ev.seq, feedback
	switch {
	case ev.env.Type == schemas.TypePlanApproved:
		v.Outcome = "approved"
		move(schemas.PlanApprovedState)
	case rejected:
		v.Outcome = "rejected"
		move(schemas.PlanIdle)
	default:
		v.Outcome = "modified"
		move(schemas.PlanExploring)
	}
	return true, nil
}

// progress follows the approved plan's DAG: each node is a step.
func progress(t *tx, ev *event, s *PlanMode, move func(string)) (bool, error) {
	if s.State != schemas.PlanExecuting {
		return false, nil
	}
	v, err := ev.decode()
	if err != nil {
		return false, nil // the dags projection records it
	}
	var dag, node, status string
	switch p := v.(type) {
	case *schemas.TaskDispatch:
		dag, node, status = p.DAGID, p.NodeID, schemas.StepInProgress
	case *schemas.TaskComplete:
		dag, node, status = p.DAGID, p.NodeID, schemas.StepCompleted
	case *schemas.TaskFailed:
		dag, node, status = p.DAGID, p.NodeID, schemas.StepFailed
	case *schemas.NodeRetry:
		dag, node, status = p.DAGID, p.NodeID, schemas.StepPending
	case *schemas.NodeSkipped:
		dag, node, status = p.DAGID, p.NodeID, schemas.StepSkipped
	case *schemas.WorkflowComplete:
		if p.DAGID != s.DAGID {
			return false, nil
		}
		if p.Outcome == schemas.OutcomeSucceeded {
			for i, td := range s.Versions[len(s.Versions)-1].Plan.Todos {
				if td.Step == 0 {
					s.Todos[i] = schemas.StepCompleted // the plan's own todos
				}
			}
			move(schemas.PlanCompleted)
		} else {
			s.FailureReason = p.Summary
			move(schemas.PlanFailed)
		}
		return true, nil
	}
	if dag != s.DAGID {
		return false, nil
	}
	n := planStepOf(node)
	if n < 1 || n > len(s.Steps) {
		return false, t.reject(Plans, ev, "plan %s has no step for node %q", s.PlanID, node)
	}
	s.Steps[n-1] = status
	if status == schemas.StepFailed && s.FailedStep == 0 {
		s.FailedStep = n
	}
	// A todo follows its step; one of a step that failed or was skipped goes
	// back to pending, to be retried (seed L35860).
	todo := status
	if todo == schemas.StepFailed || todo == schemas.StepSkipped {
		todo = schemas.StepPending
	}
	for i, td := range s.Versions[len(s.Versions)-1].Plan.Todos {
		if td.Step == n {
			s.Todos[i] = todo
		}
	}
	return true, nil
}

// holdInput holds a message typed while a plan awaits approval, and ends the
// hold of one the Guide released.
func holdInput(t *tx, ev *event, s *PlanMode) (bool, error) {
	env := ev.env
	if i := slices.IndexFunc(s.Held, func(h HeldInput) bool { return h.ID == env.ParentID }); i >= 0 && env.ParentID != "" {
		s.Held = slices.Delete(s.Held, i, i+1)
		return true, nil
	}
	if s.State != schemas.PlanAwaitingApproval {
		return false, nil
	}
	p, err := payloadOf[schemas.UserInput](t, Plans, ev)
	if p == nil {
		return false, err
	}
	if HoldsInput(p.Text) {
		s.Held = append(s.Held, HeldInput{ID: env.ID, Seq: ev.seq, Text: p.Text})
		return true, nil
	}
	return false, nil
}

// HoldsInput reports whether a message typed while a plan awaits approval
// waits for it to be settled: anything but a slash command.
func HoldsInput(text string) bool {
	return !strings.HasPrefix(strings.TrimSpace(text), "/")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
