package schedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Source is the scheduler's "scheduler" identity in the events it appends.
const Source = "scheduler"

// DefaultTick is how often the scheduler looks for due schedules.
const DefaultTick = time.Second

// Schedules reads the schedules projection.
type Schedules interface {
	Schedules(ctx context.Context) ([]*projections.Schedule, error)
	// WaitFor blocks until the projections have applied seq.
	WaitFor(ctx context.Context, seq uint64) error
}

// Scheduler fires due schedules. Any number may run, on any servers: a due
// time is fired once (see the package comment).
type Scheduler struct {
	Log   *events.Log
	Store Schedules
	// Catalog checks a plan again at each firing (tools, agents, argument
	// schemas may have changed since it was added).
	Catalog plan.Catalog
	Now     func() time.Time
	Tick    time.Duration
	Logger  *slog.Logger
}

// Run steps every Tick until ctx ends, once the projections hold what the
// stream held when it started (a firing they have not folded yet would look
// due again).
func (s *Scheduler) Run(ctx context.Context) error {
	last, err := s.Log.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if err := s.Store.WaitFor(ctx, last); err != nil {
		return fmt.Errorf("scheduler: wait for the projections: %w", err)
	}
	tick := s.Tick
	if tick <= 0 {
		tick = DefaultTick
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := s.Step(ctx); err != nil && ctx.Err() == nil {
			s.logger().Warn("scheduler step", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Scheduler) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// Step fires each active schedule that is due and out of its backoff, and
// disables each that failed MaxFailures times in a row.
func (s *Scheduler) Step(ctx context.Context) error {
	scs, err := s.Store.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("read schedules: %w", err)
	}
	now := s.Now()
	var errs []error
	for _, sc := range scs {
		if sc.State != projections.ScheduleActive {
			continue
		}
		if err := s.step(ctx, sc, now); err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Scheduler) step(ctx context.Context, sc *projections.Schedule, now time.Time) error {
	if sc.Failures >= MaxFailures {
		return s.disable(ctx, sc)
	}
	c, err := Compile(sc.Spec)
	if err != nil {
		return err // validated when added: only a removed time zone gets here
	}
	due, count, ok := c.Due(sc.Created, sc.LastDue, now)
	if !ok || (sc.Failures > 0 && now.Before(sc.LastFailure.Add(Backoff(sc.Failures)))) {
		return nil
	}
	batch, err := s.firing(sc, due, count)
	if err != nil {
		return err
	}
	if _, err := s.Log.AppendBatch(ctx, batch); err != nil && !errors.Is(err, events.ErrDuplicate) {
		return err
	}
	s.logger().Info("schedule fired", "schedule", sc.Name, "due", due, "missed", count)
	return nil
}

// firing is the batch of one firing: the run's session, its plan or
// request, and the schedule_fire event, every id derived from the schedule
// and the due time.
func (s *Scheduler) firing(sc *projections.Schedule, due time.Time, count int) ([]*schemas.Envelope, error) {
	key := firingKey(sc, due)
	fire := schemas.ScheduleFire{Name: sc.Name, Due: due, Missed: max(count-1, 0)}
	var (
		run *schemas.Envelope
		err error
	)
	session := "sched-" + key[:12]
	if sc.Plan != "" {
		p, perr := plan.Load([]byte(sc.Plan), s.Catalog)
		if perr != nil {
			fire.Refused = "the plan no longer validates: " + perr.Error()
		} else {
			p.DAG.ID = "d-" + key[:16]
			if p.DAG.Name == "" {
				p.DAG.Name = sc.Name
			}
			fire.DAGID = p.DAG.ID
			run, err = schemas.New(schemas.TypeDAGExecute, session, "user", "orchestrator", due, schemas.DAGExecute{DAG: p.DAG, WorkDir: sc.WorkDir})
		}
	} else {
		run, err = schemas.New(schemas.TypeUserInput, session, "user", "", due, schemas.UserInput{Text: sc.Request})
	}
	if err != nil {
		return nil, err
	}
	var batch []*schemas.Envelope
	if run != nil {
		// A firing is background work, not the user's own request: it
		// leaves the user's reserve of tool processes free.
		run.Priority = schemas.PriorityBackground
		fire.Session = session
		created, err := schemas.New(schemas.TypeSessionCreate, session, "user", "", due, schemas.SessionCreate{
			Name: "schedule " + sc.Name, Config: schemas.SessionConfig{WorkDir: sc.WorkDir}, Metadata: map[string]string{"schedule": sc.Name},
		})
		if err != nil {
			return nil, err
		}
		resumed, err := schemas.New(schemas.TypeSessionResume, session, "user", "", due, schemas.SessionResume{Reason: "schedule " + sc.Name})
		if err != nil {
			return nil, err
		}
		batch = append(batch, created, resumed, run)
	}
	fired, err := schemas.New(schemas.TypeScheduleFire, schemas.SystemSession, Source, "user", due, fire)
	if err != nil {
		return nil, err
	}
	batch = append(batch, fired)
	for i, e := range batch {
		e.ID = derivedID(key, i)
		if i > 0 {
			e.ParentID = batch[0].ID
		}
	}
	return batch, nil
}

// disable appends the schedule_disable event and a notice for the user.
func (s *Scheduler) disable(ctx context.Context, sc *projections.Schedule) error {
	key := hash(fmt.Sprintf("%s\x00%d\x00disable\x00%d", sc.Name, sc.Seq, sc.Fired))
	d, err := schemas.New(schemas.TypeScheduleDisable, schemas.SystemSession, Source, "user", s.Now(),
		schemas.ScheduleControl{Name: sc.Name, Failures: sc.Failures, Reason: fmt.Sprintf("%d consecutive failures, the last: %s", sc.Failures, sc.Reason)})
	if err != nil {
		return err
	}
	n, err := schemas.New(schemas.TypeNotice, schemas.SystemSession, Source, "user", s.Now(), schemas.Notice{
		Level: schemas.NoticeWarn,
		Text:  fmt.Sprintf("schedule %s is disabled after %d consecutive failures (the last: %s)", sc.Name, sc.Failures, sc.Reason),
		Hint:  "fix what fails, then: sylk schedule resume " + sc.Name,
	})
	if err != nil {
		return err
	}
	d.ID, n.ID = derivedID(key, 0), derivedID(key, 1)
	if _, err := s.Log.AppendBatch(ctx, []*schemas.Envelope{d, n}); err != nil && !errors.Is(err, events.ErrDuplicate) {
		return err
	}
	s.logger().Warn("schedule disabled", "schedule", sc.Name, "failures", sc.Failures)
	return nil
}

// firingKey names one firing: the schedule (as added: a name re-added after
// a removal is another schedule) and the due time.
func firingKey(sc *projections.Schedule, due time.Time) string {
	return hash(fmt.Sprintf("%s\x00%d\x00%d", sc.Name, sc.Seq, due.UnixNano()))
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// derivedID is the i-th event id of a firing: a name-based UUID of the key.
func derivedID(key string, i int) string {
	return uuid.NewHash(sha256.New(), uuid.Nil, fmt.Appendf(nil, "%s\x00%d", key, i), 8).String()
}
