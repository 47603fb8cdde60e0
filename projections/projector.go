package projections

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/events"
)

// Source is the event log a projector reads; *events.Log is one.
type Source interface {
	// Tail follows the events matching subject from a cursor, live. The
	// projector asks for events.Raw: it decodes them itself.
	Tail(ctx context.Context, subject string, from events.Cursor, opts ...events.ReadOption) (*events.Tail, error)
	// Scan calls fn for the events matching subject from a cursor up to to (0:
	// the last the stream holds when Scan starts), in order, then returns.
	Scan(ctx context.Context, subject string, from events.Cursor, to uint64, fn func(*events.Event) error, opts ...events.ReadOption) error
	// Get returns the event at a sequence (an error wrapping events.ErrNotFound
	// if there is none).
	Get(ctx context.Context, seq uint64) (*events.Event, error)
	// LastSeq is the sequence of the last event in the stream.
	LastSeq(ctx context.Context) (uint64, error)
}

// allEvents is the subject of every event.
const allEvents = events.Prefix + ".>"

// readAhead is how many events the reader decodes ahead of the fold.
const readAhead = 8192

// stateFlushEvents is how many events a catch-up folds at most before it
// writes the objects they changed. In between, batches carry the keys of the
// write-only projections (the session log, traces, history) and their
// cursors, and the changed objects wait in the cache: a DAG node or a session
// touched by events far apart is then encoded and written once, not once per
// batch. A crash costs at most this many events folded again into the other
// projections.
const stateFlushEvents = 250_000

// Projector folds the stream into a Store. Run follows it live; CatchUp folds
// what the stream holds now and returns. Only one of them runs at a time.
type Projector struct {
	s   *Store
	src Source
	c   *cache

	// until bounds a fold (verify): a projection never applies past it.
	until map[string]uint64
	// foreign lists the sequences of a one-session fold's foreign switches.
	foreign map[uint64]bool

	busy sync.Mutex // held by Run, CatchUp and Rebuild

	mu          sync.Mutex
	cancelFold  context.CancelFunc
	rebuildWant bool
	rebuildDone chan struct{}
}

// Projector returns the store's projector. A store has one: the first call
// sets the source it reads (later calls pass an equivalent log).
func (s *Store) Projector(src Source) *Projector {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.projector == nil {
		s.projector = &Projector{s: s, src: src, c: newCache(s.opts.CacheBytes)}
	}
	return s.projector
}

// Run folds the stream from the stored cursors, then follows it live until ctx
// ends (it then returns ctx's error). Status says when it has caught up. When
// the stream cannot be read (its server is restarting, its cluster has no
// quorum) it waits and reads on, with a warning each time; a failure of the
// store ends it.
func (p *Projector) Run(ctx context.Context) error {
	p.busy.Lock()
	defer p.busy.Unlock()
	wait := streamRetryMin
	for {
		fctx, cancel := context.WithCancel(ctx)
		p.mu.Lock()
		p.cancelFold = cancel
		p.mu.Unlock()
		err := p.fold(fctx, false, 0)
		if err == nil {
			p.s.markReady()
			p.s.endRebuild()
			wait = streamRetryMin
			err = p.fold(fctx, true, 0)
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.mu.Lock()
		want := p.rebuildWant
		p.rebuildWant = false
		p.mu.Unlock()
		if !want {
			var se *streamError
			if errors.As(err, &se) {
				p.s.log.Warn("projections: the stream cannot be read; reading on from the cursors", "in", wait, "err", err)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
				wait = min(2*wait, streamRetryMax)
				continue
			}
			if err == nil {
				err = errors.New("live tail ended")
			}
			return err
		}
		if err := p.startRebuild(); err != nil {
			return err
		}
	}
}

// streamRetryMin and streamRetryMax bound Run's wait before it reads again
// a stream it could not read: doubled at each failure, reset once caught up.
const (
	streamRetryMin = 250 * time.Millisecond
	streamRetryMax = 5 * time.Second
)

// CatchUp folds every event the stream holds now and returns the last
// sequence applied.
func (p *Projector) CatchUp(ctx context.Context) (uint64, error) {
	p.busy.Lock()
	defer p.busy.Unlock()
	if err := p.fold(ctx, false, 0); err != nil {
		return p.s.Cursor(), err
	}
	p.s.markReady()
	return p.s.Cursor(), nil
}

// Rebuild drops every projection and folds the stream again. If Run is active
// it asks Run to do it and returns once the drop is done (Status().Rebuild
// then shows the progress); otherwise it folds to the end of the stream,
// calling progress after each batch, and returns when done.
func (p *Projector) Rebuild(ctx context.Context, progress func(Progress)) error {
	if p.busy.TryLock() {
		defer p.busy.Unlock()
		defer p.s.tuneGC()()
		if err := p.startRebuild(); err != nil {
			return err
		}
		err := p.foldReporting(ctx, progress)
		if err == nil {
			p.s.markReady()
			p.s.endRebuild()
		}
		return err
	}
	p.mu.Lock()
	if p.cancelFold == nil {
		p.mu.Unlock()
		return errors.New("the projector is busy with a catch-up; try again")
	}
	p.rebuildWant = true
	done := make(chan struct{})
	p.rebuildDone = done
	p.cancelFold()
	p.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tuneGC applies the store's rebuild collector settings (Options.GCPercent
// and HeapBytes) and returns what puts the previous ones back.
func (s *Store) tuneGC() (restore func()) {
	return TuneGC(s.opts.GCPercent, s.opts.HeapBytes)
}

// TuneGC sets the Go collector's GOGC to percent and, when heapBytes is
// set and no limit is (GOMEMLIMIT), caps the heap at what the process
// holds live now plus heapBytes, and returns what puts the previous
// settings back; a percent of 0 changes nothing. They are the process's:
// for a process that does one big job (a rebuild, a first index), never a
// server's. While jobs overlap (tests), the first one's apply and the last
// one's end puts back what was there before.
func TuneGC(percent int, heapBytes int64) (restore func()) {
	if percent == 0 {
		return func() {}
	}
	gcTuning.Lock()
	defer gcTuning.Unlock()
	if gcTuning.jobs++; gcTuning.jobs == 1 {
		gc := debug.SetGCPercent(percent)
		limit := debug.SetMemoryLimit(-1)
		if limit == math.MaxInt64 && heapBytes > 0 {
			// What the process holds now (the embedded server's index of
			// the stream, mostly) is not the job's to bound.
			runtime.GC()
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(live)
			debug.SetMemoryLimit(int64(live[0].Value.Uint64()) + heapBytes)
		}
		gcTuning.restore = func() {
			debug.SetGCPercent(gc)
			debug.SetMemoryLimit(limit)
		}
	}
	return func() {
		gcTuning.Lock()
		defer gcTuning.Unlock()
		if gcTuning.jobs--; gcTuning.jobs == 0 {
			gcTuning.restore()
		}
	}
}

// gcTuning counts the jobs running with their collector settings.
var gcTuning struct {
	sync.Mutex
	jobs    int
	restore func()
}

// startRebuild drops everything and marks a rebuild under way.
func (p *Projector) startRebuild() error {
	p.c.reset()
	if err := p.s.dropAll(); err != nil {
		return fmt.Errorf("drop projections: %w", err)
	}
	p.s.mu.Lock()
	p.s.rebuild = &Progress{}
	p.s.mu.Unlock()
	p.mu.Lock()
	if p.rebuildDone != nil {
		close(p.rebuildDone)
		p.rebuildDone = nil
	}
	p.mu.Unlock()
	p.s.log.Info("rebuilding projections from the stream")
	return nil
}

func (p *Projector) foldReporting(ctx context.Context, progress func(Progress)) error {
	if progress != nil {
		p.s.mu.Lock()
		p.s.rebuild = &Progress{}
		p.s.mu.Unlock()
		defer func() {
			p.s.mu.Lock()
			r := p.s.rebuild
			p.s.mu.Unlock()
			if r != nil {
				progress(*r)
			}
		}()
	}
	return p.foldWith(ctx, false, 0, progress)
}

func (p *Projector) fold(ctx context.Context, live bool, to uint64) error {
	return p.foldWith(ctx, live, to, nil)
}

// foldWith reads the stream from the lowest cursor (up to to, if not 0) in one
// goroutine and folds it in this one, batch by batch.
func (p *Projector) foldWith(ctx context.Context, live bool, to uint64, progress func(Progress)) error {
	if !live {
		if err := p.checkHead(ctx); err != nil {
			return err
		}
		last, err := p.src.LastSeq(ctx)
		if err != nil {
			return &streamError{fmt.Errorf("read the stream's last sequence: %w", err)}
		}
		p.s.advanced(nil, nil, last, false)
	}
	from := p.s.Cursor() + 1
	if p.until != nil {
		from = 1
		for _, c := range p.s.cursorsCopy() {
			from = min(from, c+1)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *event, readAhead)
	rerr := make(chan error, 1)
	go func() {
		defer close(ch)
		// The reader decodes each event, envelope and payload in one pass
		// (events.Raw hands over the bytes), so the fold's goroutine only
		// folds.
		send := func(ev *events.Event) error {
			e := decodeEvent(ev)
			if e.env == nil && (e.subject == "" || e.id == "" && ev.Header == nil) {
				// Bytes that are no envelope, read in bulk: their rejection
				// names them by their message id, under the session of
				// their subject. Rare: one more read each.
				full, err := p.src.Get(rctx, ev.Seq)
				if err != nil {
					return err
				}
				if v := full.Header[events.HeaderMsgID]; len(v) > 0 && e.id == "" {
					e.id = v[0]
				}
				e.subject = full.Subject
			}
			if err := p.observe(rctx, ev, e); err != nil {
				return err
			}
			select {
			case ch <- e:
				return nil
			case <-rctx.Done():
				return rctx.Err()
			}
		}
		if !live {
			rerr <- p.src.Scan(rctx, allEvents, events.Cursor{Seq: from}, to, send, events.Raw(), events.Bodies())
			return
		}
		tail, err := p.src.Tail(rctx, allEvents, events.Cursor{Seq: from}, events.Raw())
		if err != nil {
			rerr <- err
			return
		}
		defer tail.Stop()
		for {
			ev, err := tail.Next(rctx)
			if err == nil {
				err = send(ev)
			}
			if err != nil {
				rerr <- err
				return
			}
		}
	}()
	ferr := p.applyLoop(ctx, ch, live, progress)
	cancel()
	for range ch {
	}
	err := <-rerr
	if ferr != nil {
		return ferr
	}
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = nil // we stopped the reader
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return &streamError{err}
	}
	if !live && p.until == nil {
		err = p.s.finishRebuild()
	}
	return err
}

// folded is what the cursors and the head record of the last event a batch
// folded: the event itself is recycled once applied.
type folded struct {
	seq     uint64
	pending uint64 // events behind it in the stream when it was read
	id      string
}

// streamError is a failure to read the stream, not to fold or store what was
// read: Run waits and reads on from its cursors, since the stream outlives a
// server restarting or a cluster that lost its quorum for a while.
type streamError struct{ err error }

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

// applyLoop folds events from ch in batches: a batch grows while the stream
// says more events follow, up to the batch limits or BatchDelay, and is
// committed at once when an event has nothing behind it. A committer goroutine
// writes batch N while this one folds batch N+1.
func (p *Projector) applyLoop(ctx context.Context, ch <-chan *event, live bool, progress func(Progress)) error {
	o := p.s.opts
	cursors, follows := p.s.cursorsCopy(), p.s.followsCopy()
	var fresh [][]byte
	for _, pr := range projectionList {
		if cursors[pr.name] == 0 && o.folds(pr) {
			fresh = append(fresh, pr.prefix())
		}
	}
	if len(fresh) > 0 && (!live || p.until != nil) {
		p.c.setFilter(newKeyFilter(fresh))
		defer p.c.setFilter(nil)
	}
	cm := newCommitter(p)
	cm.full = !live && p.rebuilding()
	defer cm.stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	var first uint64
	held := 0        // events whose changed objects wait in the cache
	var carry *event // a fork event that starts the next batch
	var prev folded  // the last event of the batch before
	fail := func(err error) error {
		cm.stop()
		p.c.reset()
		return err
	}
	for {
		var e *event
		if carry != nil {
			e, carry = carry, nil
		} else {
			select {
			case x, ok := <-ch:
				if !ok {
					return cm.wait()
				}
				e = x
			case <-ctx.Done():
				return fail(ctx.Err())
			}
		}
		if e.isFork() {
			// A fork reads the parent's state from Pebble: everything before
			// it must be committed, objects held in the cache included.
			if err := p.flushHeld(cm, prev, cursors, follows); err != nil {
				return fail(err)
			}
		}
		if first == 0 {
			first = e.seq
		}
		b := cm.batch()
		t := &tx{db: p.s.db, batch: b, cache: p.c, calls: p.s.calls}
		n := 0
		var last folded
		closed := false
		timer.Reset(o.BatchDelay)
	batch:
		for {
			e.foreign = p.foreign[e.seq]
			if e.isFork() && n > 0 {
				// A fork reads the parent's state from Pebble: end the batch
				// here and write everything before it first.
				carry = e
				break batch
			}
			if err := p.apply(ctx, t, e, cursors); err != nil {
				b.Close()
				return fail(err)
			}
			last = folded{seq: e.seq, pending: e.pending, id: e.id}
			e.release()
			n++
			if last.pending == 0 || n >= o.BatchEvents || b.Len() >= o.BatchBytes || p.c.overBudget() || (live && p.s.awaited(last.seq)) {
				break
			}
			x, ok, got := (*event)(nil), false, false
			if !live {
				// A catch-up fills its batches while the reader keeps up:
				// BatchDelay bounds only a wait for the next event. Cut at
				// BatchDelay after its start, a batch held a tenth of a second
				// of events, and a DAG node or session touched by events a
				// few thousand apart was written again in each.
				select {
				case x, ok = <-ch:
					got = true
				case <-ctx.Done():
					// The reader keeps the channel full: without this a
					// stopped rebuild folded on to the end of its batch.
					b.Close()
					return fail(ctx.Err())
				default:
					timer.Reset(o.BatchDelay)
				}
			}
			for !got {
				select {
				case x, ok = <-ch:
					got = true
				case <-p.s.poke:
					// A reader waits: if for an event of this batch, it
					// is committed now.
					if live && p.s.awaited(last.seq) {
						break batch
					}
				case <-timer.C:
					break batch
				case <-ctx.Done():
					b.Close()
					return fail(ctx.Err())
				}
			}
			if !ok {
				closed = true
				break batch
			}
			e = x
		}
		// The previous batch must be in Pebble before objects are evicted: a
		// fold reading an evicted key must find its latest value there.
		if err := cm.wait(); err != nil {
			b.Close()
			return fail(err)
		}
		p.c.evict()
		caughtUp := last.pending == 0
		prev = last
		held += n
		writeObjects := live || p.until != nil || caughtUp || closed || carry != nil || held >= stateFlushEvents || p.c.heldFull()
		if writeObjects {
			held = 0
		}
		b, advanced, marked, err := p.prepare(cm, b, last, cursors, follows, writeObjects)
		if err != nil {
			return fail(err)
		}
		pr := Progress{Done: last.seq - first + 1, Total: last.seq + last.pending - first + 1, Seconds: time.Since(start).Seconds(), Finished: caughtUp}
		if pr.Seconds > 0 {
			pr.PerSec = float64(pr.Done) / pr.Seconds
		}
		if err := cm.wait(); err != nil { // the last part of split objects
			b.Close()
			return fail(err)
		}
		cm.send(commitJob{batch: b, last: last.seq, advanced: advanced, follows: marked, streamLast: last.seq + last.pending,
			sync: !live && (caughtUp || closed), caughtUp: caughtUp, progress: pr, report: progress})
		if closed {
			return cm.wait()
		}
	}
}

// prepare encodes into b the changed objects (with writeObjects), the cursor
// of every projection b brings up to date, and the head: one batch, so state
// and cursors are never apart. Without writeObjects only the write-only
// projections' cursors advance. A cursor is written only where its stored
// form changes (see followsHead). It returns the batch to commit, b or,
// during a rebuild, the last of the batches the objects were split into
// (the ones before it are committed or in flight), the cursors it moves and
// the stored forms it changes; on error it has closed it.
func (p *Projector) prepare(cm *committer, b *pebble.Batch, last folded, cursors map[string]uint64, follows map[string]bool, writeObjects bool) (*pebble.Batch, map[string]uint64, map[string]bool, error) {
	if writeObjects {
		var err error
		if b, err = p.c.flush(b, p.splitter(cm)); err != nil {
			b.Close()
			return nil, nil, nil, err
		}
		p.c.markClean()
	}
	advanced := map[string]uint64{}
	for _, pr := range projectionList {
		if (!writeObjects && !pr.writesOnly) || !p.s.opts.folds(pr) {
			continue
		}
		to := last.seq
		if p.until != nil {
			to = min(to, p.until[pr.name])
		}
		if cursors[pr.name] < to {
			advanced[pr.name] = to
			cursors[pr.name] = to
		}
	}
	marked, err := writeCursors(b, last.seq, cursors, advanced, follows)
	if err == nil {
		err = b.Set(headKey, encodeHead(last.seq, last.id), nil)
	}
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	return b, advanced, marked, nil
}

// splitter returns how the objects a rebuild held are written: in batches
// of BatchBytes, each committed while the next is encoded, the cursors in
// the last. Held for up to stateFlushEvents events, they are hundreds of
// megabytes, and one batch of them was a third of a rebuild's heap (and as
// much again in its log). Split, an interruption leaves objects ahead of
// their cursors, which only a rebuild may do: the store is marked
// unfinished until it has folded the whole stream, and a store opened with
// the mark is rebuilt again. Outside a rebuild it returns nil: one batch.
func (p *Projector) splitter(cm *committer) func(*pebble.Batch) (*pebble.Batch, error) {
	p.s.mu.Lock()
	rebuilding := p.s.incomplete
	p.s.mu.Unlock()
	if !rebuilding {
		return nil
	}
	limit := p.s.opts.BatchBytes
	return func(full *pebble.Batch) (*pebble.Batch, error) {
		if full.Len() < limit {
			return full, nil
		}
		if err := cm.wait(); err != nil {
			return full, err
		}
		cm.send(commitJob{batch: full, objectsOnly: true})
		return cm.batch(), nil
	}
}

// flushHeld commits the objects a catch-up holds in the cache, with the
// cursors of last, the last event folded, and waits until everything folded
// so far is in Pebble.
func (p *Projector) flushHeld(cm *committer, last folded, cursors map[string]uint64, follows map[string]bool) error {
	if err := cm.wait(); err != nil {
		return err
	}
	if len(p.c.dirty) == 0 || last.seq == 0 {
		return nil
	}
	b, advanced, marked, err := p.prepare(cm, cm.batch(), last, cursors, follows, true)
	if err != nil {
		return err
	}
	if err := cm.wait(); err != nil {
		b.Close()
		return err
	}
	cm.send(commitJob{batch: b, last: last.seq, advanced: advanced, follows: marked, streamLast: last.seq + last.pending})
	return cm.wait()
}

// commitJob is one prepared batch for the committer.
type commitJob struct {
	batch      *pebble.Batch
	last       uint64
	advanced   map[string]uint64
	follows    map[string]bool // the cursors whose stored form changed
	streamLast uint64
	sync       bool
	caughtUp   bool
	progress   Progress
	report     func(Progress)
	// objectsOnly: a part of a rebuild's held objects (see splitter), with
	// no cursor: nothing to tell the store.
	objectsOnly bool
}

// committer commits prepared batches in order, one at a time, and then tells
// the store (waking WaitFor) and the progress callback. Only the end of a
// catch-up is synced: the stream is the truth, so a lost tail of unsynced
// batches is folded again from the cursors that survive with it.
type committer struct {
	p    *Projector
	free chan *pebble.Batch // committed batches, reset for reuse
	jobs chan commitJob
	done chan error // one per job
	busy bool
	// full: the batches are filled to BatchBytes (a rebuild).
	full bool
	quit chan struct{}
	wg   sync.WaitGroup
}

func newCommitter(p *Projector) *committer {
	c := &committer{p: p, free: make(chan *pebble.Batch, 2), jobs: make(chan commitJob), done: make(chan error, 1), quit: make(chan struct{})}
	c.wg.Add(1)
	go c.run()
	return c
}

func (c *committer) run() {
	defer c.wg.Done()
	for {
		select {
		case j := <-c.jobs:
			c.done <- c.commit(j)
		case <-c.quit:
			return
		}
	}
}

// batch returns an empty batch, reusing a committed one's buffer: a catch-up
// fills one batch after another, and growing each from nothing is most of
// what it would allocate. A rebuild's batches start at their full size: a
// batch cut once past BatchBytes grew by doubling to twice that, and the
// two or three a rebuild keeps were a tenth of its heap.
func (c *committer) batch() *pebble.Batch {
	select {
	case b := <-c.free:
		return b
	default:
		o := c.p.s.opts
		opts := []pebble.BatchOption{pebble.WithMaxRetainedSizeBytes(o.BatchBytes * 2)}
		if c.full {
			opts = append(opts, pebble.WithInitialSizeBytes(o.BatchBytes+o.BatchBytes/4))
		}
		return c.p.s.db.NewBatch(opts...)
	}
}

func (c *committer) recycle(b *pebble.Batch) {
	b.Reset()
	select {
	case c.free <- b:
	default:
		b.Close()
	}
}

func (c *committer) commit(j commitJob) error {
	defer c.recycle(j.batch)
	wo := pebble.NoSync
	if j.sync {
		wo = c.p.s.durable()
	}
	if err := j.batch.Commit(wo); err != nil {
		if j.objectsOnly {
			return fmt.Errorf("commit a part of the rebuilt objects: %w", err)
		}
		return fmt.Errorf("commit projections up to seq %d: %w", j.last, err)
	}
	if j.objectsOnly {
		return nil
	}
	s := c.p.s
	s.advanced(j.advanced, j.follows, j.streamLast, j.caughtUp)
	if j.report != nil || c.p.rebuilding() {
		s.mu.Lock()
		if j.progress.Finished && !s.incomplete {
			s.rebuild = nil
		} else {
			// A rebuild's last batch is in, but the store is complete only
			// once finishRebuild clears its mark: until then Status says a
			// rebuild is under way, as Verify does.
			pr := j.progress
			s.rebuild = &pr
		}
		s.mu.Unlock()
		if j.report != nil {
			j.report(j.progress)
		}
	}
	return nil
}

func (c *committer) send(j commitJob) {
	c.busy = true
	c.jobs <- j
}

// wait returns the result of the batch in flight, if any.
func (c *committer) wait() error {
	if !c.busy {
		return nil
	}
	c.busy = false
	return <-c.done
}

// stop waits for the batch in flight and ends the goroutine.
func (c *committer) stop() {
	if c.quit == nil {
		return
	}
	c.wait()
	close(c.quit)
	c.wg.Wait()
	c.quit = nil
	for {
		select {
		case b := <-c.free:
			b.Close()
		default:
			return
		}
	}
}

func (p *Projector) rebuilding() bool {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.rebuild != nil
}

// apply applies one event to every projection that has not seen it.
func (p *Projector) apply(ctx context.Context, t *tx, e *event, cursors map[string]uint64) error {
	if e.isFork() {
		seed, err := prepareFork(ctx, p.s, t.db, e)
		if err != nil {
			return fmt.Errorf("session_fork at seq %d: %w", e.seq, err)
		}
		e.fork = seed
		defer func() { seed.close(); e.fork = nil }()
	}
	for _, pr := range projectionList {
		if e.seq <= cursors[pr.name] || !p.s.opts.folds(pr) {
			continue
		}
		if p.until != nil && e.seq > p.until[pr.name] {
			continue
		}
		if err := pr.apply(t, e); err != nil {
			return fmt.Errorf("projection %s, seq %d: %w", pr.name, e.seq, err)
		}
	}
	return nil
}

// checkHead makes sure the last event folded is still in the stream with the
// same id. If not, the stream was replaced or lost its tail (an unsynced stream
// after a crash): the projections describe events that no longer exist, so
// they are dropped and rebuilt. A store whose rebuild was interrupted is
// rebuilt again from the start.
func (p *Projector) checkHead(ctx context.Context) error {
	if p.until != nil {
		return nil
	}
	p.s.mu.Lock()
	interrupted := p.s.interrupted
	p.s.interrupted = false
	p.s.mu.Unlock()
	if interrupted {
		p.s.log.Warn("a rebuild of the projections was interrupted; rebuilding them again")
		return p.startRebuild()
	}
	v, err := p.s.get(headKey)
	if err != nil {
		return err
	}
	seq, id := decodeHead(v)
	if seq == 0 {
		return nil
	}
	found := ""
	ev, err := p.src.Get(ctx, seq)
	switch {
	case err == nil:
		found = newEvent(ev).id
	case !errors.Is(err, events.ErrNotFound):
		return &streamError{fmt.Errorf("check the stream at seq %d: %w", seq, err)}
	}
	if found == id {
		return nil
	}
	p.s.log.Warn("the projections are ahead of or differ from the stream; rebuilding them",
		"seq", seq, "projected_id", id, "stream_id", found, "err", ErrDiverged)
	return p.startRebuild()
}

// endRebuild clears the rebuild progress once the fold has caught up (also
// when there was nothing to fold).
func (s *Store) endRebuild() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebuild = nil
}

func (s *Store) markReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked()
}

func (s *Store) readyLocked() {
	if !s.ready {
		s.ready = true
		s.startup = time.Since(s.openedAt)
	}
}
