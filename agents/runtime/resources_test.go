package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/pressure"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// The tool process pool spans every session: background work waits once it
// would take the user's reserve, and the user's own DAG runs meanwhile.
func TestUserWorkTakesTheReservedToolSlot(t *testing.T) {
	pool, err := tools.NewPool(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(c *Config) { c.Tools.Pool = pool })
	bg := r.submit("BG", `
name: background
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sleep, "60"]}}
  - {id: b, agent: tester, tool: exec, args: {argv: [sleep, "60"]}}
`)
	brokertest.Eventually(t, 30*time.Second, "one background tool running, the other waiting", func() bool {
		u := pool.Usage()
		return u.Other == 1 && u.WaitingOther == 1
	})
	user := r.submit("U", `
name: mine
nodes:
  - {id: now, agent: engineer, tool: exec, args: {argv: ["true"]}}
`, func(e *schemas.Envelope) { e.Priority = schemas.PriorityUserInteractive })
	if dag := r.wait(user); dag.State != projections.DAGSucceeded {
		t.Fatalf("the user's DAG: %s", dag.State)
	}
	if u := pool.Usage(); u.Other != 1 || u.WaitingOther != 1 {
		t.Fatalf("the background DAG moved while the user's ran: %+v", u)
	}
	cancel, _ := schemas.New(schemas.TypeSignal, "BG", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalCancel, Scope: schemas.ScopeSession})
	r.append(cancel)
	if dag := r.wait(bg); dag.State != projections.DAGCancelled {
		t.Fatalf("the background DAG after a cancel: %s", dag.State)
	}
}

// Under pressure (the stream at 90% of its quota) the governor pauses the
// background sessions, each with a signal saying why, and never the user's;
// a background DAG waits meanwhile while the user's runs; once the stream is
// back under 80% the governor resumes what it paused, and only that, also
// when it is a new governor (the server restarted meanwhile): what was
// paused is in the sessions projection.
func TestPressurePausesBackgroundWorkAndResumesIt(t *testing.T) {
	r := newRig(t)
	pressureRig(t, r)
	g := &pressure.Governor{Log: r.log, Sessions: r.store}
	full := schemas.StreamQuota{Level: schemas.QuotaCritical, Percent: 93, Bytes: 93 << 20, MaxBytes: 100 << 20}
	if err := g.Observe(r.ctx, full); err != nil {
		t.Fatal(err)
	}
	signals := func() []schemas.Signal { return governorSignals(t, r) }
	if s := signals(); len(s) != 1 || s[0].Action != schemas.SignalPause || !strings.Contains(s[0].Reason, "holds 93% of its disk quota") {
		t.Fatalf("signals after the pressure: %+v", s)
	}
	// A second reading under the same pressure pauses nothing twice.
	if err := g.Observe(r.ctx, full); err != nil {
		t.Fatal(err)
	}
	bg := underPressure(t, r)
	if n := len(signals()); n != 1 {
		t.Fatalf("%d governor signals after a second reading, want 1", n)
	}
	if err := g.Observe(r.ctx, schemas.StreamQuota{Level: schemas.QuotaWarn, Percent: 85}); err != nil {
		t.Fatal(err)
	}
	if n := len(signals()); n != 1 {
		t.Fatalf("resumed at 85%%: %d signals", n)
	}
	brokertest.Eventually(t, 10*time.Second, "the pause projected", func() bool {
		s, err := r.store.Session(r.ctx, "BG")
		return err == nil && s.Paused && s.PausedBy == pressure.Source
	})
	restarted := &pressure.Governor{Log: r.log, Sessions: r.store}
	if err := restarted.Observe(r.ctx, schemas.StreamQuota{Percent: 40}); err != nil {
		t.Fatal(err)
	}
	if s := signals(); len(s) != 2 || s[1].Action != schemas.SignalResume || !strings.Contains(s[1].Reason, "pressure passed") {
		t.Fatalf("signals after the pressure passed: %+v", s)
	}
	if dag := r.wait(bg); dag.State != projections.DAGSucceeded {
		t.Fatalf("the background DAG after the resume: %s", dag.State)
	}
}

// pressureRig gives r a background session (one a schedule started), BG,
// and a session of the user's own, which the governor never touches.
func pressureRig(t *testing.T, r *rig) {
	t.Helper()
	bgCreate, _ := schemas.New(schemas.TypeSessionCreate, "BG", "user", "", time.Now(), schemas.SessionCreate{Name: "schedule nightly", Metadata: map[string]string{"schedule": "nightly"}})
	bgResume, _ := bgCreate.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	r.append(bgCreate, bgResume)
	held := r.submit("HELD", `
name: held
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
`)
	if dag := r.wait(held); dag.State != projections.DAGSucceeded {
		t.Fatalf("%s", dag.State)
	}
	brokertest.Eventually(t, 10*time.Second, "the sessions projected", func() bool {
		ss, err := r.store.Sessions(r.ctx, projections.SessionFilter{})
		return err == nil && len(ss) == 2
	})
}

// underPressure submits a DAG to the paused BG and one to a session of the
// user's own: the user's runs, BG's waits (no task dispatched). It returns
// BG's DAG.
func underPressure(t *testing.T, r *rig) string {
	t.Helper()
	bg := r.submit("BG", `
name: nightly
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
`)
	user := r.submit("U", `
name: mine
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
`, func(e *schemas.Envelope) { e.Priority = schemas.PriorityUserInteractive })
	if dag := r.wait(user); dag.State != projections.DAGSucceeded {
		t.Fatalf("the user's DAG under pressure: %s", dag.State)
	}
	if n := len(r.events(events.Filter{Session: "BG", Type: schemas.TypeTaskDispatch})); n != 0 {
		t.Fatalf("the paused background session dispatched %d tasks", n)
	}
	return bg
}

// governorSignals are the signals the governor appended, all to BG.
func governorSignals(t *testing.T, r *rig) []schemas.Signal {
	var out []schemas.Signal
	for _, e := range r.events(events.Filter{Type: schemas.TypeSignal}) {
		p, _ := schemas.PayloadAs[schemas.Signal](e)
		if e.Source == pressure.Source {
			if e.SessionID != "BG" {
				t.Fatalf("the governor signalled session %s, which is not background work", e.SessionID)
			}
			out = append(out, *p)
		}
	}
	return out
}

// Memory pressure (the server's cgroup at 95% of its limit) pauses the
// background work as the stream's quota does; it resumes only once every
// resource is back under 80%: the disk's reading alone does not resume it
// while the memory is still short, nor, after a restart, before the memory
// has been read at all.
func TestMemoryPressurePausesBackgroundWorkAndResumesIt(t *testing.T) {
	r := newRig(t)
	pressureRig(t, r)
	g := &pressure.Governor{Log: r.log, Sessions: r.store}
	short := pressure.Memory{Source: pressure.MemoryCgroup, Used: 1945 << 20, Limit: 2 << 30, Percent: 94, Level: schemas.QuotaCritical}
	if err := g.ObserveMemory(r.ctx, short); err != nil {
		t.Fatal(err)
	}
	if s := governorSignals(t, r); len(s) != 1 || s[0].Action != schemas.SignalPause ||
		!strings.Contains(s[0].Reason, "memory in use is 94% of the server's cgroup memory limit (1.9 GiB of 2.0 GiB)") {
		t.Fatalf("signals after the memory pressure: %+v", s)
	}
	bg := underPressure(t, r)
	// The disk is fine, the memory still short, then only warned of.
	for _, step := range []func() error{
		func() error { return g.Observe(r.ctx, schemas.StreamQuota{Percent: 10, Bytes: 10, MaxBytes: 100}) },
		func() error {
			return g.ObserveMemory(r.ctx, pressure.Memory{Source: pressure.MemoryCgroup, Percent: 85, Level: schemas.QuotaWarn, Limit: 100})
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		if n := len(governorSignals(t, r)); n != 1 {
			t.Fatalf("resumed while the memory is short: %d signals", n)
		}
	}
	if n := len(r.events(events.Filter{Session: "BG", Type: schemas.TypeTaskDispatch})); n != 0 {
		t.Fatalf("the paused background session dispatched %d tasks after the disk's reading", n)
	}
	// The server restarts meanwhile: its new governor, fed both resources,
	// does not resume on the disk's reading, which it hears of first.
	brokertest.Eventually(t, 10*time.Second, "the pause projected", func() bool {
		s, err := r.store.Session(r.ctx, "BG")
		return err == nil && s.Paused && s.PausedBy == pressure.Source
	})
	restarted := &pressure.Governor{Log: r.log, Sessions: r.store, Resources: []string{pressure.ResourceDisk, pressure.ResourceMemory}}
	if err := restarted.Observe(r.ctx, schemas.StreamQuota{Percent: 10, Bytes: 10, MaxBytes: 100}); err != nil {
		t.Fatal(err)
	}
	if n := len(governorSignals(t, r)); n != 1 {
		t.Fatalf("a restarted governor resumed on the disk's reading before any of the memory: %d signals", n)
	}
	if err := restarted.ObserveMemory(r.ctx, pressure.Memory{Source: pressure.MemoryMachine, Used: 40, Limit: 100, Percent: 40}); err != nil {
		t.Fatal(err)
	}
	if s := governorSignals(t, r); len(s) != 2 || s[1].Action != schemas.SignalResume ||
		!strings.Contains(s[1].Reason, "pressure passed: memory in use is 40% of the machine's memory") {
		t.Fatalf("signals after the memory pressure passed: %+v", s)
	}
	if dag := r.wait(bg); dag.State != projections.DAGSucceeded {
		t.Fatalf("the background DAG after the resume: %s", dag.State)
	}
}
