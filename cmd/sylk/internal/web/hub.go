package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// ClientBuffer is how many events a live view may have waiting to be sent
// before it is dropped, by default: a browser that stops reading never holds up the
// server or the other viewers. The browser's EventSource then reconnects
// and resumes after the last event it got (Last-Event-ID).
const ClientBuffer = 1024

// maxBatch bounds how many events the hub gathers before handing them over.
const maxBatch = 256

// frame is one event as the server-sent event every view it matches is
// sent, encoded once for all of them.
type frame struct {
	seq  uint64
	toks [4]string // session, source, target, type
	// record is the whole server-sent event: "id: SEQ\ndata: LINE\n\n",
	// LINE the event as JSON (events.Line).
	record []byte
}

// watcher is one live view: its filter, its bounded queue of batches, and
// dropped, closed when the hub gave up on it.
type watcher struct {
	filter  events.Filter
	all     bool // the filter lets every event through
	queue   chan []*frame
	queued  int // events in queue (under the hub's lock)
	dropped chan struct{}
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

// hub follows the stream with one tail and hands each event to the views
// watching it, never waiting for one.
type hub struct {
	// observe, if set, sees the events of observeType, decoded, before the
	// views do.
	observe     func(*events.Event)
	observeType schemas.Type
	buffer      int
	mu          sync.Mutex
	watchers    map[*watcher]struct{}
	// drops counts the views dropped for not reading (tests and benchmarks).
	drops int
}

// Watching is how many live views are open.
func (h *hub) Watching() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers)
}

func newHub(buffer int) *hub { return &hub{buffer: buffer, watchers: map[*watcher]struct{}{}} }

func (h *hub) watch(f events.Filter) *watcher {
	w := &watcher{filter: f, all: f == events.Filter{}, queue: make(chan []*frame, h.buffer), dropped: make(chan struct{})}
	h.mu.Lock()
	h.watchers[w] = struct{}{}
	h.mu.Unlock()
	return w
}

func (h *hub) unwatch(w *watcher) {
	h.mu.Lock()
	delete(h.watchers, w)
	h.mu.Unlock()
}

// received tells the hub a view took a batch of n events off its queue.
func (h *hub) received(w *watcher, n int) {
	h.mu.Lock()
	w.queued -= n
	h.mu.Unlock()
}

// Drops is how many views the hub dropped because they did not keep up.
func (h *hub) Drops() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.drops
}

// run tails the stream (undecoded) from its end until ctx ends. An event is
// decoded and encoded once, and only when a view watches or observe wants
// it. Events that follow at once (the tail says how many are pending) are
// handed to the views as one batch: a view wakes once per burst, not once
// per event.
func (h *hub) run(ctx context.Context, tail *events.Tail) {
	defer tail.Stop()
	var batch []*frame
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("web: the stream's tail ended", "err", err)
			}
			return
		}
		toks := subjectTokens(ev.Subject)
		watched := h.Watching() > 0
		observed := h.observe != nil && schemas.Type(toks[3]) == h.observeType
		if !watched && !observed {
			batch = nil
			continue
		}
		payload := decodeEvent(ev)
		if observed && ev.Env != nil {
			h.observe(ev)
		}
		if watched {
			f, err := frameOf(ev, toks, payload)
			if err != nil {
				slog.Warn("web: an event does not encode", "seq", ev.Seq, "err", err)
			} else {
				batch = append(batch, f)
			}
		}
		// Pending events are stored already, so they come at once.
		if len(batch) > 0 && (ev.Pending == 0 || len(batch) >= maxBatch) {
			h.publish(batch)
			batch = nil
		}
	}
}

// publish hands a batch to every view it matches (the batch itself to a
// view of every event, so it is shared), dropping a view whose queue would
// hold more than its buffer.
func (h *hub) publish(batch []*frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers {
		mine := batch
		if !w.all {
			mine = nil
			for _, f := range batch {
				if w.matches(f) {
					mine = append(mine, f)
				}
			}
			if len(mine) == 0 {
				continue
			}
		}
		if w.queued+len(mine) > h.buffer {
			h.drop(w)
			continue
		}
		select {
		case w.queue <- mine:
			w.queued += len(mine)
		default:
			h.drop(w)
		}
	}
}

func (h *hub) drop(w *watcher) {
	delete(h.watchers, w)
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
	if t := strings.Split(subject, "."); len(t) == 6 {
		copy(toks[:], t[2:])
	}
	return toks
}

// frameOf encodes a decoded event (payload its decoded payload, nil if it
// has none) as its server-sent event. The line is json.Marshal(ev.Line())
// byte for byte, without decoding the payload twice.
func frameOf(ev *events.Event, toks [4]string, payload any) (*frame, error) {
	subject, err := json.Marshal(ev.Subject)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 96+2*len(ev.Data))
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, "\ndata: {\"seq\":"...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, ",\"subject\":"...)
	b = append(b, subject...)
	switch {
	case ev.Env != nil:
		env, err := ev.Env.MarshalJSONWith(payload)
		if err != nil {
			return nil, err
		}
		b = append(b, ",\"envelope\":"...)
		b = append(b, env...)
	case ev.Err != nil:
		why, err := json.Marshal(ev.Err.Error())
		if err != nil {
			return nil, err
		}
		b = append(b, ",\"invalid\":"...)
		b = append(b, why...)
	}
	b = append(b, "}\n\n"...)
	return &frame{seq: ev.Seq, toks: toks, record: b}, nil
}
