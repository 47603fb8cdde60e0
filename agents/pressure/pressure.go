// Package pressure is the seed's graceful degradation (seed L7320-7370):
// under resource pressure the lowest-value work pauses first, and resumes
// when the pressure has passed; the user's own work is never touched.
//
// The pressure it watches is the event stream's disk quota (a
// stream_quota reading, events.Log.WatchQuota) and the memory the server
// may use (ReadMemory: its cgroup's limit, or the machine's memory). The
// work it pauses is background work: the sessions a schedule started
// (their runs carry schemas.PriorityBackground), newest first. It pauses
// them with ordinary pause signals whose reason says why, so the runners
// hold their messages as for any pause, and `sylk tail` or the web view
// show the reason; it resumes the ones it paused, and only those, once
// every resource is back under its warning level (hysteresis: pausing at
// 90%, resuming under 80%).
// What it paused is in the sessions projection (a session paused by its
// signal has PausedBy Source): a governor started after a restart resumes
// the sessions its predecessor paused once the pressure has passed.
package pressure

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// Source is the source of the signals the governor appends.
const Source = "server"

// The resources the governor reads.
const (
	ResourceDisk   = "disk"   // the event stream's disk quota (Observe)
	ResourceMemory = "memory" // the server's memory (ObserveMemory)
)

// Sessions is what the governor reads: *projections.Store.
type Sessions interface {
	Sessions(ctx context.Context, f projections.SessionFilter) ([]*projections.Session, error)
}

// Governor pauses background sessions under pressure and resumes them
// after. Observe is its input; it is safe for concurrent use.
type Governor struct {
	Log      *events.Log
	Sessions Sessions
	// Now stamps the signals (default time.Now).
	Now func() time.Time
	// Resources are the resources it is fed (ResourceDisk, ResourceMemory):
	// it resumes only once each has been read under its warning level, so a
	// governor started after a restart does not resume on the first resource
	// it hears of and pause again on the next. Empty means whatever it has
	// read.
	Resources []string

	mu     sync.Mutex
	loaded bool     // paused holds what the projection says was paused
	under  bool     // under pressure
	paused []string // the sessions it paused, in the order paused
	// levels is each resource's last level read (ResourceDisk, ResourceMemory).
	levels map[string]int
}

// reading is one resource's use, as the governor's reasons say it.
type reading struct {
	resource string
	level    int
	// use says it: "the event stream holds 93% of its disk quota (...)".
	use string
}

// Background reports whether a session is background work the governor may
// pause: one a schedule started.
func Background(s *projections.Session) bool { return s.Metadata["schedule"] != "" }

// Observe takes a reading of the stream's quota: at the critical level it
// pauses every running background session not yet paused (newest first, so
// that under a longer pressure the oldest work is the last held); once it
// and every other resource read are back under the warning level it
// resumes the sessions it paused.
func (g *Governor) Observe(ctx context.Context, q schemas.StreamQuota) error {
	return g.observe(ctx, reading{resource: ResourceDisk, level: q.Level,
		use: fmt.Sprintf("the event stream holds %d%% of its disk quota (%s of %s)", q.Percent, tools.ByteSize(q.Bytes), tools.ByteSize(q.MaxBytes))})
}

// ObserveMemory takes a reading of the memory, as Observe does of the
// stream's quota.
func (g *Governor) ObserveMemory(ctx context.Context, m Memory) error {
	of := "the machine's memory"
	if m.Source == MemoryCgroup {
		of = "the server's cgroup memory limit"
	}
	return g.observe(ctx, reading{resource: ResourceMemory, level: m.Level,
		use: fmt.Sprintf("memory in use is %d%% of %s (%s of %s)", m.Percent, of, tools.ByteSize(m.Used), tools.ByteSize(m.Limit))})
}

func (g *Governor) observe(ctx context.Context, r reading) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.loaded {
		if err := g.load(ctx); err != nil {
			return err
		}
	}
	if g.levels == nil {
		g.levels = map[string]int{}
	}
	g.levels[r.resource] = r.level
	switch {
	case r.level >= schemas.QuotaCritical:
		g.under = true
		return g.pauseBackground(ctx, r)
	case g.under && g.clear():
		g.under = false
		return g.resumePaused(ctx, r)
	}
	return nil
}

// clear reports whether every resource read, and every one of Resources, is
// under its warning level.
func (g *Governor) clear() bool {
	for _, r := range g.Resources {
		if _, read := g.levels[r]; !read {
			return false
		}
	}
	for _, l := range g.levels {
		if l > 0 {
			return false
		}
	}
	return true
}

// load takes up the sessions an earlier governor paused and nobody resumed,
// least recently changed first: they are under pressure until a reading says
// it passed.
func (g *Governor) load(ctx context.Context) error {
	all, err := g.Sessions.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		return fmt.Errorf("pressure: list the sessions: %w", err)
	}
	all = slices.DeleteFunc(all, func(s *projections.Session) bool { return !s.Paused || s.PausedBy != Source })
	slices.SortFunc(all, func(a, b *projections.Session) int { return cmp.Compare(a.UpdatedSeq, b.UpdatedSeq) })
	for _, s := range all {
		g.paused = append(g.paused, s.ID)
	}
	g.under, g.loaded = len(g.paused) > 0, true
	return nil
}

func (g *Governor) pauseBackground(ctx context.Context, r reading) error {
	all, err := g.Sessions.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		return fmt.Errorf("pressure: list the sessions: %w", err)
	}
	var victims []*projections.Session
	for _, s := range all {
		if Background(s) && !s.Paused && !slices.Contains(g.paused, s.ID) &&
			(s.State == projections.StateActive || s.State == projections.StateCreated) {
			victims = append(victims, s)
		}
	}
	slices.SortFunc(victims, func(a, b *projections.Session) int { return cmpDesc(a.CreatedSeq, b.CreatedSeq) })
	why := fmt.Sprintf("resource pressure: %s; scheduled work pauses first, "+
		"and resumes once it is back under %d%%; your own work goes on", r.use, schemas.QuotaWarn)
	for _, s := range victims {
		if err := g.signal(ctx, s.ID, schemas.SignalPause, why); err != nil {
			return err
		}
		g.paused = append(g.paused, s.ID)
		slog.Warn("pressure: paused a background session", "session", s.ID, "name", s.Name, "resource", r.resource, "use", r.use)
	}
	return nil
}

func (g *Governor) resumePaused(ctx context.Context, r reading) error {
	why := "resource pressure passed: " + r.use
	for len(g.paused) > 0 {
		id := g.paused[0]
		if err := g.signal(ctx, id, schemas.SignalResume, why); err != nil {
			return err
		}
		g.paused = g.paused[1:]
		slog.Info("pressure: resumed a background session", "session", id)
	}
	return nil
}

func (g *Governor) signal(ctx context.Context, session, action, why string) error {
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	env, err := schemas.New(schemas.TypeSignal, session, Source, "orchestrator", now(),
		schemas.Signal{Action: action, Scope: schemas.ScopeSession, Reason: why})
	if err != nil {
		return err
	}
	if _, err := g.Log.Append(ctx, env); err != nil {
		return fmt.Errorf("pressure: %s session %s: %w", action, session, err)
	}
	return nil
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
