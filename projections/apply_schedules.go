package projections

import (
	"slices"

	"github.com/sylk/sylk/schemas"
)

// Schedule states.
const (
	ScheduleActive   = "active"
	SchedulePaused   = "paused"
	ScheduleDisabled = "disabled"
	ScheduleRemoved  = "removed"
)

// Outcomes of a schedule's run.
const (
	RunRunning = "running"
	RunRefused = "refused"
)

// maxScheduleRuns bounds the runs a schedule keeps (the newest).
const maxScheduleRuns = 20

// applySchedules folds the schedules: their specs and states, each firing,
// and the outcome of each firing's session (its workflow_complete), which
// counts consecutive failures.
func applySchedules(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeScheduleAdd:
		p, err := payloadOf[schemas.ScheduleAdd](t, Schedules, ev)
		if p == nil {
			return err
		}
		k := scheduleKey(p.Name)
		s, err := load[Schedule](t, k)
		if err != nil {
			return err
		}
		if s != nil && s.State != ScheduleRemoved {
			return t.reject(Schedules, ev, "schedule %q exists already (added at seq %d)", p.Name, s.Seq)
		}
		store(t, k, &Schedule{ScheduleAdd: *p, State: ScheduleActive, Created: env.Timestamp, Seq: ev.seq})
	case schemas.TypeSchedulePause, schemas.TypeScheduleResume, schemas.TypeScheduleRemove, schemas.TypeScheduleDisable:
		p, err := payloadOf[schemas.ScheduleControl](t, Schedules, ev)
		if p == nil {
			return err
		}
		s, err := liveSchedule(t, ev, p.Name)
		if s == nil {
			return err
		}
		switch env.Type {
		case schemas.TypeSchedulePause:
			s.State = SchedulePaused
		case schemas.TypeScheduleResume:
			s.State, s.Failures, s.Reason = ScheduleActive, 0, ""
		case schemas.TypeScheduleRemove:
			s.State = ScheduleRemoved
		default:
			s.State, s.Reason = ScheduleDisabled, p.Reason
		}
		store(t, scheduleKey(p.Name), s)
	case schemas.TypeScheduleFire:
		p, err := payloadOf[schemas.ScheduleFire](t, Schedules, ev)
		if p == nil {
			return err
		}
		s, err := liveSchedule(t, ev, p.Name)
		if s == nil {
			return err
		}
		if !p.Due.After(s.LastDue) {
			return t.reject(Schedules, ev, "schedule %q fired for %s already (a firing at or after it is recorded)", p.Name, p.Due.UTC().Format("2006-01-02T15:04:05Z"))
		}
		s.LastDue = p.Due
		s.Fired++
		run := ScheduleRun{Due: p.Due, Session: p.Session, DAG: p.DAGID, Missed: p.Missed, Outcome: RunRunning, Seq: ev.seq}
		if p.Refused != "" {
			run.Outcome, run.Reason = RunRefused, p.Refused
			s.fail(env.Timestamp, p.Refused)
		} else if p.Session != "" {
			store(t, scheduleRunKey(p.Session), &scheduleRunRef{Name: p.Name, Due: p.Due})
		}
		s.Runs = append(s.Runs, run)
		if n := len(s.Runs); n > maxScheduleRuns {
			s.Runs = slices.Delete(s.Runs, 0, n-maxScheduleRuns)
		}
		store(t, scheduleKey(p.Name), s)
	case schemas.TypeWorkflowComplete:
		ref, err := load[scheduleRunRef](t, scheduleRunKey(env.SessionID))
		if ref == nil || err != nil {
			return err
		}
		p, err := payloadOf[schemas.WorkflowComplete](t, Schedules, ev)
		if p == nil {
			return err
		}
		k := scheduleKey(ref.Name)
		s, err := load[Schedule](t, k)
		if s == nil || err != nil {
			return err
		}
		i := slices.IndexFunc(s.Runs, func(r ScheduleRun) bool { return r.Session == env.SessionID && r.Outcome == RunRunning })
		if i < 0 {
			return nil // a later DAG of the same run's session, or a run dropped from the list
		}
		s.Runs[i].Outcome, s.Runs[i].Reason = p.Outcome, p.Summary
		if p.Outcome == schemas.OutcomeSucceeded {
			s.Failures, s.Reason = 0, ""
		} else {
			s.fail(env.Timestamp, p.Outcome+": "+p.Summary)
		}
		store(t, k, s)
	}
	return nil
}

// liveSchedule loads a schedule that exists and is not removed, or rejects ev.
func liveSchedule(t *tx, ev *event, name string) (*Schedule, error) {
	s, err := load[Schedule](t, scheduleKey(name))
	if err != nil {
		return nil, err
	}
	if s == nil || s.State == ScheduleRemoved {
		return nil, t.reject(Schedules, ev, "%s: no schedule %q", ev.env.Type, name)
	}
	return s, nil
}
