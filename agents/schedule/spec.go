// Package schedule runs plans and requests on a schedule: a cron
// expression, a fixed interval, or once at a time.
//
// A schedule is events (schedule_add, schedule_pause, schedule_resume,
// schedule_remove, schedule_fire, schedule_disable) and the schedules
// projection folds them with the outcome of each run's session. The
// [Scheduler] reads the projection and fires what is due: it appends the
// schedule_fire event and the run's first events in one batch, every id
// derived from the schedule's name and the due time, so two servers firing
// the same due time store it once (JetStream's duplicate window), and a
// firing the projection already holds is not fired again.
//
// Runs missed while no server ran collapse into one: the latest due time
// fires, with the count it stands for. Consecutive failures back off 1, 5,
// 15 and 60 minutes; the fifth disables the schedule with a notice, and a
// success resets the count. A plan of tool nodes runs on the direct tier,
// with no LLM; a request goes to the Guide like `sylk run "..."`.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sylk/sylk/schemas"
)

// Spec says when a schedule fires: exactly one of Cron, Every or At.
type Spec = schemas.ScheduleSpec

// MinEvery is the shortest interval a schedule may fire at.
const MinEvery = time.Second

// parser reads standard 5-field cron expressions, 6 with a leading seconds
// field, and the @hourly family of descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Normalize trims and collapses the spec's fields: spaces around and inside
// a cron expression, a zone's surrounding spaces.
func Normalize(s Spec) Spec {
	s.Cron = strings.Join(strings.Fields(s.Cron), " ")
	s.Every = strings.TrimSpace(s.Every)
	s.At = strings.TrimSpace(s.At)
	s.TZ = strings.TrimSpace(s.TZ)
	return s
}

// Compiled is a validated spec that computes due times.
type Compiled struct {
	Spec
	loc   *time.Location
	cron  cron.Schedule
	every time.Duration
	at    time.Time
}

// Compile validates s (normalized): an error names the field, the value and
// what is wrong.
func Compile(s Spec) (*Compiled, error) {
	s = Normalize(s)
	set := 0
	for _, v := range []string{s.Cron, s.Every, s.At} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("give exactly one of --cron EXPR, --every DURATION or --at TIME")
	}
	c := &Compiled{Spec: s, loc: time.UTC}
	if s.TZ != "" {
		loc, err := time.LoadLocation(s.TZ)
		if err != nil {
			return nil, fmt.Errorf("--tz %q: not a time zone (use an IANA name such as Europe/Paris or UTC): %w", s.TZ, err)
		}
		c.loc = loc
	}
	switch {
	case s.Cron != "":
		sched, err := parser.Parse(s.Cron)
		if err != nil {
			return nil, fmt.Errorf("Invalid cron expression %q: %w", s.Cron, err)
		}
		c.cron = sched
	case s.Every != "":
		d, err := time.ParseDuration(s.Every)
		if err != nil {
			return nil, fmt.Errorf("--every %q: not a duration (e.g. 90s, 15m, 3h): %w", s.Every, err)
		}
		if d < MinEvery {
			return nil, fmt.Errorf("--every %q: at least %s", s.Every, MinEvery)
		}
		c.every = d
	default:
		at, err := ParseAt(s.At, c.loc)
		if err != nil {
			return nil, err
		}
		c.at = at
	}
	return c, nil
}

// ParseAt reads a one-shot time: RFC 3339, or "2006-01-02 15:04[:05]" in
// loc.
func ParseAt(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--at %q: not a time: use RFC 3339 (2026-12-01T09:00:00Z) or \"2026-12-01 09:00\" in --tz", s)
}

// CheckNew refuses what a new schedule may not be: a one-shot time already
// past.
func (c *Compiled) CheckNew(now time.Time) error {
	if c.OneShot() && !c.at.After(now) {
		return fmt.Errorf("--at %q is in the past (now %s): give a time to come", c.At, now.In(c.loc).Format(time.RFC3339))
	}
	return nil
}

// OneShot reports whether the schedule fires once.
func (c *Compiled) OneShot() bool { return c.At != "" }

// Next is the first due time strictly after t.
func (c *Compiled) Next(t time.Time) time.Time {
	switch {
	case c.cron != nil:
		return c.cron.Next(t.In(c.loc))
	case c.every > 0:
		return t.Add(c.every)
	default:
		if c.at.After(t) {
			return c.at
		}
		return time.Time{}
	}
}

// Due is the latest due time after last and at or before now, and how many
// due times since last it stands for (missed runs collapse into one). ok is
// false when nothing is due. An interval counts from start when nothing
// fired yet.
func (c *Compiled) Due(start, last, now time.Time) (due time.Time, count int, ok bool) {
	from := last
	if from.IsZero() {
		from = start
	}
	if c.every > 0 {
		n := int(now.Sub(from) / c.every)
		if n < 1 {
			return time.Time{}, 0, false
		}
		return from.Add(time.Duration(n) * c.every), n, true
	}
	if c.OneShot() {
		if !last.IsZero() || c.at.After(now) {
			return time.Time{}, 0, false
		}
		return c.at, 1, true
	}
	t := c.Next(from)
	for ; !t.IsZero() && !t.After(now) && count < maxMissedCount; t = c.Next(t) {
		due, count, ok = t, count+1, true
	}
	if count == maxMissedCount && !t.After(now) {
		// Far behind (a seconds field, a long outage): the latest due
		// time is found from a day back; the count says "at least".
		for t = c.Next(now.Add(-24 * time.Hour)); !t.IsZero() && !t.After(now); t = c.Next(t) {
			due = t
		}
	}
	return due, count, ok
}

// maxMissedCount bounds the count of missed cron due times Due walks.
const maxMissedCount = 100_000

// Backoff is how long a schedule waits after its failures'th consecutive
// failure (1-based): 1, 5, 15, then 60 minutes.
func Backoff(failures int) time.Duration {
	steps := []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 60 * time.Minute}
	if failures < 1 {
		return 0
	}
	return steps[min(failures, len(steps))-1]
}

// MaxFailures consecutive failures disable a schedule.
const MaxFailures = 5
