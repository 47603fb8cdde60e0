package llm

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/sylk/sylk/schemas"
)

// PriorityOf is the gate priority of an agent's calls (seed L3926-3998):
// planning before execution before validation before background work. Calls
// made while handling the user's own input get schemas.PriorityUserInteractive.
func PriorityOf(agent string) schemas.Priority {
	switch agent {
	case "guide":
		return schemas.PriorityUserInteractive
	case "architect":
		return schemas.PriorityPlanning
	case "inspector", "tester":
		return schemas.PriorityValidation
	case "archivalist", "librarian":
		return schemas.PriorityBackground
	}
	return schemas.PriorityExecution
}

// gate admits calls: at most slots in flight, the waiting ones in priority
// order (higher first, then first come first served), none while a rate limit
// pause lasts. Its Pop honours the context, unlike the seed's.
type gate struct {
	now func() time.Time

	mu      sync.Mutex
	slots   int
	busy    int
	waiting waiters
	seq     uint64
	until   time.Time   // paused until then
	timer   *time.Timer // wakes the queue when the pause ends
	closed  bool
}

type waiter struct {
	prio    schemas.Priority
	seq     uint64
	ready   chan struct{}
	granted bool
	index   int
}

type waiters []*waiter

func (w waiters) Len() int { return len(w) }
func (w waiters) Less(i, j int) bool {
	if w[i].prio != w[j].prio {
		return w[i].prio > w[j].prio
	}
	return w[i].seq < w[j].seq
}
func (w waiters) Swap(i, j int) { w[i], w[j] = w[j], w[i]; w[i].index = i; w[j].index = j }
func (w *waiters) Push(x any)   { it := x.(*waiter); it.index = len(*w); *w = append(*w, it) }
func (w *waiters) Pop() any {
	old := *w
	it := old[len(old)-1]
	*w = old[:len(old)-1]
	it.index = -1
	return it
}

func newGate(slots int, now func() time.Time) *gate {
	return &gate{slots: slots, now: now}
}

// acquire waits for a slot; release gives it back. It fails only with ctx.
func (g *gate) acquire(ctx context.Context, prio schemas.Priority) (release func(), err error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, ErrClosed
	}
	if len(g.waiting) == 0 && g.busy < g.slots && !g.pausedLocked() {
		g.busy++
		g.mu.Unlock()
		return g.releaseFunc(), nil
	}
	g.seq++
	w := &waiter{prio: prio, seq: g.seq, ready: make(chan struct{})}
	heap.Push(&g.waiting, w)
	g.mu.Unlock()

	select {
	case <-w.ready:
		return g.releaseFunc(), nil
	case <-ctx.Done():
		g.mu.Lock()
		defer g.mu.Unlock()
		if w.granted {
			g.busy--
			g.grantLocked()
		} else {
			heap.Remove(&g.waiting, w.index)
		}
		return nil, ctx.Err()
	}
}

func (g *gate) releaseFunc() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.busy--
			g.grantLocked()
		})
	}
}

func (g *gate) pausedLocked() bool { return g.now().Before(g.until) }

// grantLocked hands free slots to the best waiters, unless paused; a pause
// arms a timer that grants when it ends.
func (g *gate) grantLocked() {
	if g.closed {
		return
	}
	if g.pausedLocked() {
		if g.timer == nil {
			g.timer = time.AfterFunc(g.until.Sub(g.now()), g.wake)
		}
		return
	}
	for g.busy < g.slots && len(g.waiting) > 0 {
		w := heap.Pop(&g.waiting).(*waiter)
		w.granted = true
		g.busy++
		close(w.ready)
	}
}

func (g *gate) wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timer = nil
	g.grantLocked()
}

// pause stops admissions until until (or later, if a pause already runs
// longer). It reports whether the gate was not paused before: the start of
// a rate-limit episode.
func (g *gate) pause(until time.Time) (started bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	started = !g.pausedLocked()
	if until.After(g.until) {
		g.until = until
		if g.timer != nil {
			g.timer.Stop()
			g.timer = nil
		}
		g.grantLocked()
	}
	return started
}

// pausedUntil is when the current pause ends (zero or past: not paused).
func (g *gate) pausedUntil() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.until
}

// waitPause blocks until no pause is in effect, or ctx ends.
func (g *gate) waitPause(ctx context.Context) error {
	for {
		g.mu.Lock()
		wait := g.until.Sub(g.now())
		g.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// close stops the timer; waiting calls keep waiting for their contexts.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.timer != nil {
		g.timer.Stop()
		g.timer = nil
	}
}
