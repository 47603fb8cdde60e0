package schedule_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/agents/runtime"
	"github.com/sylk/sylk/agents/schedule"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a whole runtime (real broker, real Pebble store and projector,
// every agent) and a clock the test moves: offset is added to the wall
// clock, because run outcomes carry the agents' real timestamps.
type rig struct {
	t      *testing.T
	ctx    context.Context
	log    *events.Log
	store  *projections.Store
	dir    string
	cat    plan.Catalog
	offset atomic.Int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, log: events.New(b.JetStream()), store: store, dir: t.TempDir()}
	cfg := runtime.Config{JetStream: b.JetStream(), Store: store, DefaultWorkDir: r.dir, AckWait: 5 * time.Second}
	r.cat = cfg.Catalog()
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); store.Projector(r.log).Run(rctx) }()
	go func() {
		defer wg.Done()
		if err := runtime.Run(rctx, cfg); err != nil {
			t.Errorf("runtime: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		store.Close()
	})
	return r
}

func (r *rig) now() time.Time { return time.Now().Add(time.Duration(r.offset.Load())) }

// advance moves the clock d ahead; set puts it d ahead of the wall clock.
func (r *rig) advance(d time.Duration) { r.offset.Add(int64(d)) }
func (r *rig) set(d time.Duration)     { r.offset.Store(int64(d)) }

func (r *rig) scheduler() *schedule.Scheduler {
	return &schedule.Scheduler{Log: r.log, Store: r.store, Catalog: r.cat, Now: r.now}
}

func (r *rig) add(name string, spec schemas.ScheduleSpec, planSrc string) {
	r.t.Helper()
	env, err := schemas.New(schemas.TypeScheduleAdd, schemas.SystemSession, "user", "user", r.now(), schemas.ScheduleAdd{Name: name, Spec: spec, Plan: planSrc, WorkDir: r.dir})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.log.Append(r.ctx, env); err != nil {
		r.t.Fatal(err)
	}
	r.wait(name, "added", func(*projections.Schedule) bool { return true })
}

// wait polls the schedule until cond holds.
func (r *rig) wait(name, what string, cond func(*projections.Schedule) bool) *projections.Schedule {
	r.t.Helper()
	var sc *projections.Schedule
	brokertest.Eventually(r.t, 60*time.Second, "schedule "+name+" "+what, func() bool {
		s, err := r.store.Schedule(r.ctx, name)
		if err != nil {
			return false
		}
		sc = s
		return cond(s)
	})
	return sc
}

func (r *rig) step(s *schedule.Scheduler) {
	r.t.Helper()
	if err := s.Step(r.ctx); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) count(typ schemas.Type) int {
	r.t.Helper()
	evs, err := r.log.Read(r.ctx, events.Filter{Type: typ}.Subject(), events.Cursor{}, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return len(evs)
}

const okPlan = `name: tick
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo tick >> ticks.txt"]}}
`

// TestDirectTier fires a plan of tool nodes: it runs with no LLM event at
// all; a due time fires once however many schedulers step; missed runs
// collapse into one.
func TestDirectTier(t *testing.T) {
	r := newRig(t)
	r.add("tick", schemas.ScheduleSpec{Every: "1m"}, okPlan)
	a, b := r.scheduler(), r.scheduler()

	r.step(a)
	if n := r.count(schemas.TypeScheduleFire); n != 0 {
		t.Fatalf("fired before its first period: %d", n)
	}
	r.advance(time.Minute + time.Second)
	r.step(a)
	r.step(b) // another server, before the projection has seen the firing
	sc := r.wait("tick", "ran once", func(s *projections.Schedule) bool {
		return len(s.Runs) == 1 && s.Runs[0].Outcome == schemas.OutcomeSucceeded
	})
	if sc.Fired != 1 || r.count(schemas.TypeScheduleFire) != 1 || r.count(schemas.TypeDAGExecute) != 1 {
		t.Fatalf("one due time fired %d times (%d schedule_fire, %d dag_execute)", sc.Fired, r.count(schemas.TypeScheduleFire), r.count(schemas.TypeDAGExecute))
	}
	r.step(b)
	if n := r.count(schemas.TypeScheduleFire); n != 1 {
		t.Fatalf("fired again within the period: %d", n)
	}

	// Five periods pass with no scheduler running: one firing for all.
	r.advance(5 * time.Minute)
	r.step(b)
	sc = r.wait("tick", "ran the missed periods once", func(s *projections.Schedule) bool {
		return len(s.Runs) == 2 && s.Runs[1].Outcome == schemas.OutcomeSucceeded
	})
	if sc.Runs[1].Missed != 4 {
		t.Errorf("missed %d, want 4 (5 periods in one firing)", sc.Runs[1].Missed)
	}
	evs, err := r.log.Read(r.ctx, events.Prefix+".>", events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.HasPrefix(string(ev.Env.Type), "llm_") {
			t.Errorf("a direct-tier run has an LLM event: %s", ev.Env.Type)
		}
	}
}

// TestBackoffAndDisable: consecutive failures back off 1, 5, 15, 60
// minutes, a firing refused because its plan no longer validates counts as
// one, and the fifth disables the schedule with a notice.
func TestBackoffAndDisable(t *testing.T) {
	r := newRig(t)
	r.add("flaky", schemas.ScheduleSpec{Every: "1s"}, `name: flaky
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["false"]}}
`)
	s := r.scheduler()
	failures := func(n int) func(*projections.Schedule) bool {
		return func(sc *projections.Schedule) bool { return sc.Failures == n }
	}
	// The backoff runs from the failure, stamped with the wall clock: the
	// clock is set relative to it, 20 s either side.
	for i, backoff := range []time.Duration{0, time.Minute, 5 * time.Minute, 15 * time.Minute} {
		r.set(backoff - 20*time.Second)
		r.step(s)
		if n := r.count(schemas.TypeScheduleFire); n != i {
			t.Fatalf("fired during its %s backoff: %d firings", backoff, n)
		}
		r.set(backoff + 20*time.Second)
		r.step(s)
		r.wait("flaky", "failed again", failures(i+1))
	}
	// The fifth: the plan's tool is gone from the catalogue.
	s.Catalog.Tools = []string{"read_file"}
	r.set(time.Hour + 20*time.Second)
	r.step(s)
	sc := r.wait("flaky", "refused", failures(5))
	if last := sc.Runs[len(sc.Runs)-1]; last.Outcome != projections.RunRefused || !strings.Contains(last.Reason, "the plan no longer validates") {
		t.Errorf("last run %+v", last)
	}
	r.step(s)
	sc = r.wait("flaky", "disabled", func(sc *projections.Schedule) bool { return sc.State == projections.ScheduleDisabled })
	if !strings.HasPrefix(sc.Reason, "5 consecutive failures") {
		t.Errorf("reason %q", sc.Reason)
	}
	r.set(3 * time.Hour)
	r.step(s)
	if n := r.count(schemas.TypeScheduleFire); n != 5 {
		t.Errorf("a disabled schedule fired: %d firings", n)
	}
	notices, err := r.log.Read(r.ctx, events.Filter{Session: schemas.SystemSession, Type: schemas.TypeNotice}.Subject(), events.Cursor{}, 0)
	if err != nil || len(notices) != 1 {
		t.Fatalf("notices %d %v", len(notices), err)
	}
	n, _ := schemas.PayloadAs[schemas.Notice](notices[0].Env)
	if !strings.Contains(n.Text, "schedule flaky is disabled after 5 consecutive failures") || n.Hint != "fix what fails, then: sylk schedule resume flaky" {
		t.Errorf("notice %+v", n)
	}
}
