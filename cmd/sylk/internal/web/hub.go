package web

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// ClientBuffer is how many events a live view may have waiting to be sent
// before it is dropped, by default: a browser that stops reading never holds
// up the server or the other viewers. The browser's EventSource then
// reconnects and resumes after the last event it got (Last-Event-ID). The
// events come as the projector reads them, in bursts of thousands when it
// catches up: the buffer holds such a burst while a view waits for a CPU
// (the frames are shared by the views, so it costs each view a pointer per
// event).
const ClientBuffer = 8192

// maxBatch bounds how many events the hub gathers before handing them over.
const maxBatch = 256

// frame is one event as the server-sent event every view it matches is
// sent, encoded once for all of them.
type frame struct {
	seq     uint64
	subject string
	// toks are the subject's (session, source, target, type), set when
	// the frame is published while a view with a filter watches.
	toks [4]string
	// record is the whole server-sent event: "id: SEQ\ndata: LINE\n\n",
	// LINE the event's brief as JSON (events.Event.AppendBrief), in a block
	// of records (see records), at offset at of its data. Never appended
	// to: the next record may follow.
	record []byte
	at     int
	// blk is the block holding record and this frame, nil for a copy
	// (own).
	blk *block
}

// span is frames a view sends at once: consecutive frames of one block,
// whose records follow one another there (sent as one slice of it), or a
// frame of a view's own (a copy). A view of every event is handed a burst
// as a span per block, however many events it holds: what it costs a view
// grows with the blocks it sends, not with the events.
type span []frame

// extend adds s to spans: to the last one when s's frames come right after
// it in the same block, else as a span of its own (added says so).
func extend(spans []span, s span) (_ []span, added bool) {
	if n := len(spans); n > 0 {
		if last := spans[n-1]; len(last) < cap(last) && &last[:len(last)+1][len(last)] == &s[0] {
			spans[n-1] = last[:len(last)+len(s)]
			return spans, false
		}
	}
	return append(spans, s), true
}

// watcher is one live view: its filter, the frames the hub handed it and
// the view has not taken yet (queued of them, at most the hub's buffer),
// and the signals the view waits on.
type watcher struct {
	filter  events.Filter
	all     bool   // the filter lets every event through
	pending []span // under the hub's lock
	queued  int
	// ready says pending has frames to send now (it holds at most one
	// signal: the hub never waits on a view); dropped is closed when the
	// hub gave up on the view.
	ready, dropped chan struct{}
}

func (w *watcher) matches(f *frame) bool {
	want := [4]string{w.filter.Session, w.filter.Source, w.filter.Target, string(w.filter.Type)}
	for i, v := range want {
		if v != "" && v != f.toks[i] {
			return false
		}
	}
	return true
}

// hub hands each event the projector reads to the views watching it, never
// waiting for one.
type hub struct {
	buffer   int
	mu       sync.Mutex
	watchers []*watcher
	// filtered counts the watchers with a filter: the frames get their
	// subject's tokens only while there is one.
	filtered int
	// watching is len(watchers), read without the lock for each event.
	watching atomic.Int32
	// drops counts the views dropped for not reading (tests and benchmarks).
	drops int
	// batch gathers the frames of a burst (batched of them), records
	// encodes them (feed's, one goroutine).
	batch   []span
	batched int
	records records
	// due wakes the views with frames waiting, a frame interval after the
	// first of them (armed: it will): all of them at once.
	due   *time.Timer
	armed bool
}

// frameInterval is how long the views gather events before they are woken
// to write them: a burst becomes one wake-up, one write and one flush per
// view rather than one per event, for a delay no eye sees; and the views
// are woken together, by one timer.
const frameInterval = 25 * time.Millisecond

// Watching is how many live views are open.
func (h *hub) Watching() int { return int(h.watching.Load()) }

func newHub(buffer int) *hub {
	h := &hub{buffer: buffer, records: records{free: make(chan *block, freeBlocks)}}
	h.due = time.AfterFunc(frameInterval, h.wake)
	h.due.Stop()
	return h
}

// wake signals each view with frames waiting (due's).
func (h *hub) wake() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	for _, w := range h.watchers {
		if w.queued > 0 {
			signal(w.ready)
		}
	}
}

func (h *hub) watch(f events.Filter) *watcher {
	w := &watcher{filter: f, all: f == events.Filter{}, ready: make(chan struct{}, 1), dropped: make(chan struct{})}
	h.mu.Lock()
	h.watchers = append(h.watchers, w)
	if !w.all {
		h.filtered++
	}
	h.watching.Store(int32(len(h.watchers)))
	h.mu.Unlock()
	return w
}

// remove takes w off the watchers (under the lock) and releases what waits
// for it.
func (h *hub) remove(w *watcher) {
	if i := slices.Index(h.watchers, w); i >= 0 {
		h.watchers = slices.Delete(h.watchers, i, i+1)
		if !w.all {
			h.filtered--
		}
	}
	h.watching.Store(int32(len(h.watchers)))
	release(w.pending)
	w.pending, w.queued = nil, 0
}

// unwatch closes a view; sent is what its last take handed it.
func (h *hub) unwatch(w *watcher, sent []span) {
	release(sent)
	h.mu.Lock()
	h.remove(w)
	h.mu.Unlock()
}

// take hands a view the frames waiting for it, in order. sent is what the
// previous take handed it, sent by now: its blocks are released (a block is
// written again once every view sent its records) and its array gathers
// the next spans, so a view's queue is not grown anew for every burst.
func (h *hub) take(w *watcher, sent []span) []span {
	release(sent)
	clear(sent)
	h.mu.Lock()
	defer h.mu.Unlock()
	p := w.pending
	w.pending, w.queued = sent[:0], 0
	return p
}

// Drops is how many views the hub dropped because they did not keep up.
func (h *hub) Drops() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.drops
}

// feed takes the next event of the stream, decoded (payload as
// projections.Store.Observe hands it). With no view open it does nothing.
// Otherwise the event is encoded once for every view, and the events that
// follow at once (the reader says how many are pending) are handed to the
// views as one batch: a view wakes once per burst, not once per event.
func (h *hub) feed(ev *events.Event, payload any) {
	if h.watching.Load() == 0 {
		clear(h.batch)
		h.batch, h.batched = h.batch[:0], 0
		h.records.settle()
		return
	}
	f, err := h.records.add(ev, payload)
	if err != nil {
		slog.Warn("web: an event does not encode", "seq", ev.Seq, "err", err)
	} else {
		h.batch, _ = extend(h.batch, f)
		h.batched++
	}
	// Pending events are stored already, so they come at once.
	if h.batched > 0 && (ev.Pending == 0 || h.batched >= maxBatch) {
		h.publish(h.batch)
		// The views hold the frames now: the array gathers the next
		// burst, and the blocks records filled are the views' to release.
		clear(h.batch)
		h.batch, h.batched = h.batch[:0], 0
		h.records.settle()
	}
}

// publish hands a batch (spans of the hub's blocks) to every view it
// matches, dropping a view that would hold more than the buffer. A view of
// every event gets the batch's spans, joined to the one it waits to send
// when they follow it, and each of its spans holds a reference to its
// block. A view with a filter gets copies of the records it takes (it
// sends few of a block's, not runs of them). The views are woken a frame
// interval after the first frame waits (due), or at once when half a
// view's buffer does: a view wakes a few times per burst, not once per
// event.
func (h *hub) publish(batch []span) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.filtered > 0 {
		for _, s := range batch {
			for i := range s {
				s[i].toks = subjectTokens(s[i].subject)
			}
		}
	}
	// Backwards: dropping a view moves only the views seen already.
	for i := len(h.watchers) - 1; i >= 0; i-- {
		w := h.watchers[i]
		n := w.queued
		for _, s := range batch {
			if w.all {
				var added bool
				if w.pending, added = extend(w.pending, s); added {
					s[0].blk.refs.Add(1)
				}
				w.queued += len(s)
				continue
			}
			for j := range s {
				if w.matches(&s[j]) {
					w.pending = append(w.pending, s[j].own())
					w.queued++
				}
			}
		}
		switch {
		case w.queued == n:
		case w.queued > h.buffer:
			h.drop(w)
		case w.queued >= h.buffer/2:
			signal(w.ready)
		case !h.armed:
			h.armed = true
			h.due.Reset(frameInterval)
		}
	}
}

// signal leaves a signal in c unless one waits there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *hub) drop(w *watcher) {
	h.remove(w)
	close(w.dropped)
	h.drops++
}

// decodeEvent decodes ev's envelope into ev.Env (or says why not in ev.Err) and
// returns its payload, decoded in the same pass.
func decodeEvent(ev *events.Event) any {
	env := &schemas.Envelope{}
	p, err := schemas.UnmarshalPayloadInto(ev.Data, env)
	if err != nil {
		ev.Err = err
		return nil
	}
	ev.Env = env
	return p
}

// subjectTokens are the filter tokens of an event's subject
// (sylk.v1.<session>.<source>.<target>.<type>).
func subjectTokens(subject string) [4]string {
	var toks [4]string
	rest := subject
	for i := -2; i < len(toks); i++ { // the first two are sylk.v1
		tok, after, found := strings.Cut(rest, ".")
		if found == (i == len(toks)-1) {
			return [4]string{} // fewer or more than six tokens
		}
		if i >= 0 {
			toks[i] = tok
		}
		rest = after
	}
	return toks
}

// blockSize is the size of the blocks records are written into, and
// blockFrames how many frames a block holds at most (a record is some
// 400 bytes). A block with less than blockRoom left is done: a record that
// outgrows its block is encoded into an array of its own (an allocation,
// more as it grows) then copied.
const (
	blockSize   = 64 << 10
	blockFrames = 512
	blockRoom   = 4 << 10
)

// freeBlocks is how many blocks the hub keeps for reuse: a few frame
// intervals of a fast stream.
const freeBlocks = 32

// block holds records every view shares, one after the other, and their
// frames. A block of the hub's is written again once no view holds a frame
// of it: refs counts the spans of it views hold, plus one while records
// may still write into it or hand out its frames (until the hub settles).
type block struct {
	data   []byte
	frames []frame
	refs   atomic.Int64
	// free takes the block back once refs is 0; nil: the block is never
	// written again (a view's past), the garbage collector frees it.
	free chan *block
}

// records encodes events as the frames views send, into blocks it shares
// with every view: each record is written once, right after the one before
// it, so a view that sends consecutive records hands the socket one slice
// of a block, copying nothing (sse.send). The hub has one records (fed by
// one goroutine), whose blocks are written again once every view sent
// their records: the stream makes no garbage per event. A view reading the
// past has its own (free nil), whose blocks the garbage collector frees.
type records struct {
	cur  *block      // the block being filled
	done []*block    // the blocks filled since the hub last settled
	free chan *block // the blocks to write again
}

// add encodes a decoded event (payload its decoded payload, nil if it has
// none) as its server-sent event, its data the event's brief line
// (events.Event.AppendBrief: what the page shows of it), and places it
// after the last record. The frame comes as a span of its block, which the
// next frames of the block may extend.
func (r *records) add(ev *events.Event, payload any) (span, error) {
	if b := r.cur; b == nil || len(b.frames) == cap(b.frames) || cap(b.data)-len(b.data) < blockRoom {
		r.next()
	}
	// Encoded in place, after the block's last record; bytes written
	// past its length are no record's until it is extended over them.
	b := r.cur
	start := len(b.data)
	rest := b.data[start:]
	rec := append(rest, "id: "...)
	rec = strconv.AppendUint(rec, ev.Seq, 10)
	rec = append(rec, "\ndata: "...)
	rec, err := ev.AppendBrief(rec, payload)
	if err != nil {
		return nil, err
	}
	rec = append(rec, "\n\n"...)
	if cap(rec) == cap(rest) { // it fit
		b.data = b.data[:start+len(rec)]
	} else { // it grew into an array of its own: the next block
		r.next()
		b = r.cur
		b.data = append(b.data, rec...)
		start = 0
	}
	// The record keeps the block's capacity beyond it: that is how the
	// next record is found to follow it (follows).
	b.frames = append(b.frames, frame{seq: ev.Seq, subject: ev.Subject, record: b.data[start:], at: start, blk: b})
	return b.frames[len(b.frames)-1:], nil
}

// next starts a block: one the views are done with, or a new one. The
// block filled so far is released when the hub settles, once the views
// hold its frames.
func (r *records) next() {
	if r.cur != nil && r.free != nil {
		r.done = append(r.done, r.cur)
	}
	select {
	case r.cur = <-r.free:
	default:
		r.cur = &block{data: make([]byte, 0, blockSize), frames: make([]frame, 0, blockFrames), free: r.free}
	}
	r.cur.refs.Store(1)
}

// settle releases the blocks filled since it last did: the hub has handed
// their frames to the views (or dropped them), which hold them now.
func (r *records) settle() {
	for _, b := range r.done {
		b.release(1)
	}
	clear(r.done)
	r.done = r.done[:0]
}

// release drops n of the block's references; with the last, the block is
// emptied and given back to be written again.
func (b *block) release(n int64) {
	if b.free == nil || b.refs.Add(-n) != 0 {
		return
	}
	b.data = b.data[:0]
	clear(b.frames) // the subjects
	b.frames = b.frames[:0]
	select {
	case b.free <- b:
	default: // enough kept: the garbage collector frees it
	}
}

// release drops the reference each span of a block holds (publish took
// them); copies hold none.
func release(spans []span) {
	for _, s := range spans {
		if b := s[0].blk; b != nil {
			b.release(1)
		}
	}
}

// own is the frame with a record of its own, for a view that takes only
// some of the frames: it would otherwise hold a block for each.
func (f *frame) own() span {
	return span{{seq: f.seq, subject: f.subject, toks: f.toks, record: slices.Clone(f.record)}}
}

// follows says whether next's bytes come right after run's in one block.
func follows(run, next []byte) bool {
	return len(run) < cap(run) && len(next) > 0 && &run[:len(run)+1][len(run)] == &next[0]
}
