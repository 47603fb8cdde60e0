package schemas

import "time"

// Scheduled plans and requests. Schedules live in the system session; each
// firing starts a session of its own.
const (
	TypeScheduleAdd     Type = "schedule_add"
	TypeSchedulePause   Type = "schedule_pause"
	TypeScheduleResume  Type = "schedule_resume"
	TypeScheduleRemove  Type = "schedule_remove"
	TypeScheduleFire    Type = "schedule_fire"
	TypeScheduleDisable Type = "schedule_disable"
)

// scheduleTypes are the scheduler's types.
var scheduleTypes = map[Type]typeInfo{
	TypeScheduleAdd:     entry[ScheduleAdd]("A schedule was added: when it fires and what it runs (a validated plan or a request)."),
	TypeSchedulePause:   entry[ScheduleControl]("A schedule was paused: it fires no more until resumed."),
	TypeScheduleResume:  entry[ScheduleControl]("A paused or disabled schedule was resumed; its failure count starts again at zero."),
	TypeScheduleRemove:  entry[ScheduleControl]("A schedule was removed."),
	TypeScheduleFire:    entry[ScheduleFire]("A schedule fired for a due time, in a new session (its id derived from the schedule and the due time), or was refused."),
	TypeScheduleDisable: entry[ScheduleControl]("A schedule was disabled after too many consecutive failures."),
}

// ScheduleSpec says when a schedule fires: exactly one of Cron (5 fields, or
// 6 with seconds, or a descriptor like @hourly), Every (a Go duration) or At
// (one time: RFC 3339, or "2006-01-02 15:04" in TZ). TZ is an IANA zone for
// Cron and At (default UTC).
type ScheduleSpec struct {
	Cron  string `json:"cron,omitempty"`
	Every string `json:"every,omitempty"`
	At    string `json:"at,omitempty"`
	TZ    string `json:"tz,omitempty"`
}

// ScheduleAdd adds a schedule. It runs either Plan (a plan file's text,
// checked when added and again at each firing) or Request (a request for the
// agents, as `sylk run "..."`), in WorkDir.
type ScheduleAdd struct {
	Name     string       `json:"name"`
	Spec     ScheduleSpec `json:"spec"`
	Plan     string       `json:"plan,omitempty"`
	PlanFile string       `json:"plan_file,omitempty"`
	Request  string       `json:"request,omitempty"`
	WorkDir  string       `json:"work_dir,omitempty"`
}

// ScheduleControl pauses, resumes, removes or disables a schedule.
type ScheduleControl struct {
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
	// Failures is the consecutive failure count that disabled it.
	Failures int `json:"failures,omitempty"`
}

// ScheduleFire is one firing. Session is the run's session; Missed is how
// many due times it stands for (more than one after an outage). Refused,
// when set, says why nothing ran (the plan no longer validates): it counts
// as a failure.
type ScheduleFire struct {
	Name    string    `json:"name"`
	Due     time.Time `json:"due"`
	Session string    `json:"session,omitempty"`
	DAGID   string    `json:"dag_id,omitempty"`
	Missed  int       `json:"missed,omitempty"`
	Refused string    `json:"refused,omitempty"`
}
