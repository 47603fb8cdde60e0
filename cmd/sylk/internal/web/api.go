package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

// queries are the read-only endpoints of the query API a page may ask.
var queries = map[string]bool{
	"session.get": true, "session.list": true, "dag.get": true, "dag.list": true,
	"checkpoint.list": true, "pending.list": true, "pending.get": true,
	"replay": true, "replay.state": true, "trace.get": true, "call.tool": true, "call.llm": true,
	"history.list": true, "pipeline.list": true, "schedule.list": true, "audit.query": true,
	"projections.status": true,
}

// maxBody bounds what a page may send.
const maxBody = 1 << 20

// serveQuery forwards a page's request to the query API (sylk.api.<endpoint>)
// and answers with its JSON, or its error with the HTTP status of its code.
func (w *Web) serveQuery(rw http.ResponseWriter, r *http.Request) {
	ep := r.PathValue("endpoint")
	if !queries[ep] {
		http.Error(rw, fmt.Sprintf("no query %q: the page may ask %s", ep, "session.get, session.list, dag.get, dag.list, pending.list, replay, replay.state, trace.get, call.tool, call.llm, ..."), http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(r.Context(), api.DefaultTimeout)
	defer cancel()
	msg, err := w.opts.Conn.RequestWithContext(ctx, api.Prefix+"."+ep, body)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, nats.ErrNoResponders) {
			status = http.StatusServiceUnavailable
		}
		http.Error(rw, fmt.Sprintf("%s.%s: %v", api.Prefix, ep, err), status)
		return
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		status, _ := strconv.Atoi(code)
		if status < 400 || status > 599 {
			status = http.StatusInternalServerError
		}
		http.Error(rw, msg.Header.Get(micro.ErrorHeader), status)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(msg.Data)
}

// planAnswer is what a page sends to settle a plan that waits on the user.
type planAnswer struct {
	Session string `json:"session"`
	// Plan is the plan's id (or its correlation id).
	Plan string `json:"plan"`
}

// servePlan approves or rejects a plan that waits on the user, as `sylk plan
// approve|reject` does: a plan_approved or plan_modified (rejected) event
// from the user, in reply to the plan. It answers the event's sequence.
func (w *Web) servePlan(rw http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "approve" && action != "reject" {
		http.Error(rw, fmt.Sprintf("no plan action %q: approve or reject", action), http.StatusNotFound)
		return
	}
	var a planAnswer
	if !decode(rw, r, &a, `{"session": ..., "plan": ...}`) || !checkNames(rw, [2]string{"session", a.Session}, [2]string{"plan", a.Plan}) {
		return
	}
	seq, err := w.answer(r.Context(), a.Session, a.Plan, projections.KindPlan, func(pr *projections.PendingRequest) (schemas.Type, any) {
		if action == "approve" {
			return schemas.TypePlanApproved, schemas.PlanApproved{PlanID: pr.PlanID}
		}
		return schemas.TypePlanModified, schemas.PlanModified{PlanID: pr.PlanID, Rejected: true}
	})
	if err != nil {
		answerError(rw, err)
		return
	}
	writeJSON(rw, map[string]any{"seq": seq, "session": a.Session, "plan": a.Plan, "action": action})
}

var errNotOpen = errors.New("it is no longer waiting")

// answerError answers 409 for a request that no longer waits (or never
// did), 500 for the rest.
func answerError(rw http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	if errors.Is(err, projections.ErrNotFound) || errors.Is(err, errNotOpen) {
		status = http.StatusConflict
	}
	http.Error(rw, err.Error(), status)
}

// answer appends the user's reply to the open request of kind that ref
// names in session (a plan's or question's id, or its correlation id): the
// event reply makes of it, from the user, in reply to the request's event.
// It returns the reply's sequence.
func (w *Web) answer(ctx context.Context, session, ref, kind string, reply func(*projections.PendingRequest) (schemas.Type, any)) (uint64, error) {
	pr, err := api.NewClient(w.opts.Conn).PendingRequest(ctx, session, ref)
	if err != nil {
		return 0, err
	}
	if pr.Kind != kind {
		return 0, fmt.Errorf("%s in session %s is a %s, not a %s: %w", ref, session, pr.Kind, kind, errNotOpen)
	}
	if pr.State != projections.PendingOpen {
		return 0, fmt.Errorf("%s %s in session %s is %s: %w", kind, ref, session, pr.State, errNotOpen)
	}
	ev, err := w.opts.Log.Get(ctx, pr.Seq)
	if err != nil {
		return 0, err
	}
	if ev.Env == nil {
		return 0, fmt.Errorf("the %s at seq %d cannot be read: %w", kind, pr.Seq, ev.Err)
	}
	t, p := reply(pr)
	env, err := schemas.NewUserEvent(t, pr.Session, w.opts.Now(), p, ev.Env)
	if err != nil {
		return 0, err
	}
	return w.opts.Log.Append(ctx, env)
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	json.NewEncoder(rw).Encode(v)
}

// keepAlive is how often an idle live view gets a comment line, so proxies
// and the browser see the connection is alive.
const keepAlive = 15 * time.Second

// writeTimeout bounds one write to a live view: a browser that stopped
// reading is cut off rather than holding its handler for ever. The
// deadline moves on once a second at most (a write has 9 to 10 s): moving
// it resets a timer of the runtime's, a cost per write otherwise.
const writeTimeout = 10 * time.Second

// serveEvents streams the events matching the filters of `sylk tail`
// (session, source, target, type; since: all, new, a sequence, a time or a
// duration ago) as server-sent events: `id` is the stream sequence, `data`
// the event's brief line (events.Event.AppendBrief: its session, source,
// target, type, time and payload, what the page shows; the whole event is
// `sylk tail --json`'s). The past (since) is read from
// the stream first, then the live events follow, none twice. A reconnect's
// Last-Event-ID resumes after that event.
func (w *Web) serveEvents(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := events.Filter{Session: q.Get("session"), Source: q.Get("source"), Target: q.Get("target"), Type: schemas.Type(q.Get("type"))}
	if err := f.Validate(); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	since := q.Get("since")
	if since == "" {
		since = "new"
	}
	from, err := events.ParseCursor(since, w.opts.Now())
	if err != nil {
		http.Error(rw, "since: "+err.Error(), http.StatusBadRequest)
		return
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		seq, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			http.Error(rw, "Last-Event-ID: not a stream sequence", http.StatusBadRequest)
			return
		}
		from = events.Cursor{Seq: seq + 1}
	}
	rc := http.NewResponseController(rw)
	h := rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	// The body runs until the connection closes, not in chunks (the setup
	// the server-sent events recommendation gives, which net/http honours
	// on HTTP/1.1): a chunk costs each viewer a header, its CRLF written
	// apart at every flush and the body split around the server's 4 KiB
	// buffer, three writes to the socket per burst where this takes one.
	h.Set("Transfer-Encoding", "identity")
	rw.WriteHeader(http.StatusOK)

	// Watch first, then read the past: what is appended meanwhile comes
	// through the hub, what was there through the scan, and the sequence
	// tells the doubles apart.
	wt := w.hub.watch(f)
	var sent []span // the frames the last take handed over
	defer func() { w.hub.unwatch(wt, sent) }()
	out := &sse{rw: rw, rc: rc}
	ctx := r.Context()
	if !from.New {
		var past records // the view's own: its frames follow one another
		err := w.opts.Log.Scan(ctx, f.Subject(), from, 0, func(ev *events.Event) error {
			fr, err := past.add(ev, decodeEvent(ev))
			if err != nil {
				return err
			}
			return out.send(fr)
		}, events.Raw())
		if err == nil {
			err = out.flush()
		}
		if err != nil {
			return
		}
	} else if err := out.comment("live"); err != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wt.dropped:
			// Too far behind: end the response; the browser reconnects
			// from its Last-Event-ID.
			return
		case <-tick.C:
			if out.comment("keep-alive") != nil {
				return
			}
		case <-wt.ready:
			// What the hub gathered for a frame interval (or half the
			// buffer), sent at once: one wake-up and one write per burst,
			// however fast the stream runs.
			sent = w.hub.take(wt, sent)
			for _, s := range sent {
				if out.send(s) != nil {
					return
				}
			}
			if out.flush() != nil {
				return
			}
		}
	}
}

// sse writes server-sent events, skipping any at or before the last sent.
// Records that follow one another in a block (see records) go to the socket
// as one slice, straight from the block: a view of every event copies
// nothing, and is handed its frames a span of a block at a time. Records
// that do not (a view with a filter) are gathered in buf.
type sse struct {
	rw   http.ResponseWriter
	rc   *http.ResponseController
	last uint64
	run  []byte // consecutive records of one block, not written yet
	buf  []byte // short runs gathered, written before run
	// deadline is the write deadline set last.
	deadline time.Time
}

// directWrite is the shortest run written from its block; a shorter one is
// copied into buf with its neighbours, so a filtered view's records cost a
// write to the socket each 64 KiB (maxBuffered), not each.
const (
	directWrite = 4 << 10
	maxBuffered = 64 << 10
)

// send queues a span's records, those after the last sent.
func (s *sse) send(sp span) error {
	for len(sp) > 0 && sp[0].seq <= s.last {
		sp = sp[1:]
	}
	if len(sp) == 0 {
		return nil
	}
	first, last := &sp[0], &sp[len(sp)-1]
	rec := first.record[:last.at+len(last.record)-first.at]
	s.last = last.seq
	if follows(s.run, rec) {
		s.run = s.run[:len(s.run)+len(rec)]
		return nil
	}
	err := s.queue()
	s.run = rec
	return err
}

// queue hands the run on: a short one into buf (written once buf is
// full), a long one to the socket after buf.
func (s *sse) queue() error {
	run := s.run
	s.run = nil
	if len(run) < directWrite {
		s.buf = append(s.buf, run...)
		if len(s.buf) < maxBuffered {
			return nil
		}
		run = nil
	}
	if err := s.write(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return s.write(run)
}

func (s *sse) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if now := time.Now(); s.deadline.Sub(now) < writeTimeout-time.Second {
		s.deadline = now.Add(writeTimeout)
		s.rc.SetWriteDeadline(s.deadline)
	}
	_, err := s.rw.Write(b)
	return err
}

func (s *sse) comment(c string) error {
	if err := s.queue(); err != nil {
		return err
	}
	s.buf = append(s.buf, ": "+c+"\n\n"...)
	return s.flush()
}

// flush writes what is queued and sends it.
func (s *sse) flush() error {
	if err := s.queue(); err != nil {
		return err
	}
	if err := s.write(s.buf); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	return s.rc.Flush()
}
