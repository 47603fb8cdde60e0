package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	"github.com/sylk/sylk/events"
)

// ClientBuffer is how many events a live view may have waiting to be sent
// before it is dropped, by default: a browser that stops reading never holds up the
// server or the other viewers. The browser's EventSource then reconnects
// and resumes after the last event it got (Last-Event-ID).
const ClientBuffer = 1024

// frame is one event, encoded once for every viewer it matches.
type frame struct {
	seq  uint64
	toks [4]string // session, source, target, type
	data []byte    // the event as JSON (events.Line)
}

// watcher is one live view: its filter, its bounded queue, and dropped,
// closed when the hub gave up on it.
type watcher struct {
	filter  events.Filter
	queue   chan *frame
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
	// observe, if set, sees every event before the views do.
	observe  func(*events.Event)
	buffer   int
	mu       sync.Mutex
	watchers map[*watcher]struct{}
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
	w := &watcher{filter: f, queue: make(chan *frame, h.buffer), dropped: make(chan struct{})}
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

// Drops is how many views the hub dropped because they did not keep up.
func (h *hub) Drops() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.drops
}

// run tails the stream from its end until ctx ends, encoding each event once
// and only when someone watches.
func (h *hub) run(ctx context.Context, tail *events.Tail) {
	defer tail.Stop()
	for {
		ev, err := tail.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				slog.Warn("web: the stream's tail ended", "err", err)
			}
			return
		}
		if h.observe != nil {
			h.observe(ev)
		}
		h.publish(ev)
	}
}

func (h *hub) publish(ev *events.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.watchers) == 0 {
		return
	}
	f, err := frameOf(ev)
	if err != nil {
		slog.Warn("web: an event does not encode", "seq", ev.Seq, "err", err)
		return
	}
	for w := range h.watchers {
		if !w.matches(f) {
			continue
		}
		select {
		case w.queue <- f:
		default:
			delete(h.watchers, w)
			close(w.dropped)
			h.drops++
		}
	}
}

// frameOf encodes ev, its filter tokens read from its subject
// (sylk.v1.<session>.<source>.<target>.<type>).
func frameOf(ev *events.Event) (*frame, error) {
	data, err := json.Marshal(ev.Line())
	if err != nil {
		return nil, err
	}
	f := &frame{seq: ev.Seq, data: data}
	if toks := strings.Split(ev.Subject, "."); len(toks) == 6 {
		copy(f.toks[:], toks[2:])
	}
	return f, nil
}
