package projections

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// A fork (session_fork) is a new session whose history is its parent's up to
// a sequence, then its own. The stream holds one event for it, whatever the
// parent's length; the projections give the fork the parent's state as of
// the fork point, under the fork's own keys, so everything after it (the
// agents' steps, the user's answers) folds as in any session and nothing done
// in one of them changes the other:
//
//   - the session log records the lineage (log/fork/<sid>); a fork's log is
//     read through it: the parent's entries up to the point, then its own;
//   - sessions, dags, checkpoints and pending copy the parent's state at the
//     fork event. When the parent has no event between the fork point and the
//     fork event (a fork at the end, the common case), that state is the
//     parent's current keys, and the copy costs O(the parent's state), not
//     O(its events). Otherwise the parent's lineage is folded in memory up to
//     the point (as SessionAsOf does) and copied from there: O(the parent's
//     events). Either way the result is a function of the stream, so a
//     rebuild and verify find the same.
//
// A DAG running at the fork point goes on in the fork: its nodes dispatched
// or running then are ready again there (the work in flight belongs to the
// parent), and the Orchestrator dispatches them anew when it sees the fork.

// MaxForkDepth is how deep forks nest: a fork of a fork is allowed, a fork of
// that is refused.
const MaxForkDepth = 2

// forkSeed is what a fork event's projections work from, prepared once per
// event: why it is refused, or where the parent's state as of the fork point
// is read.
type forkSeed struct {
	problem string
	p       *schemas.SessionFork
	src     pebble.Reader
	mem     *Store // the in-memory fold src reads, when there is one
}

func (f *forkSeed) close() {
	if f != nil && f.mem != nil {
		f.mem.Close()
	}
}

// prepareFork checks a fork event and finds the parent's state. It reads only
// the session log's keys below the event's sequence, which the fold has
// committed (see applyLoop), so every projection decides the same.
func prepareFork(ctx context.Context, s *Store, db pebble.Reader, ev *event) (*forkSeed, error) {
	env := ev.env
	seed := &forkSeed{}
	v, err := ev.decode()
	if err != nil {
		seed.problem = fmt.Sprintf("payload does not decode: %v", err)
		return seed, nil
	}
	p := v.(*schemas.SessionFork)
	seed.p = p
	sid := env.SessionID
	problem := func(format string, args ...any) (*forkSeed, error) {
		seed.problem = fmt.Sprintf(format, args...)
		return seed, nil
	}
	switch {
	case sid == schemas.SystemSession:
		return problem("the system session %s cannot be a fork", sid)
	case !schemas.ValidName(p.Parent):
		return problem("parent %q is not a session id", p.Parent)
	case p.Parent == sid:
		return problem("session %s cannot fork itself", sid)
	case p.ParentSeq == 0 || p.ParentSeq >= ev.seq:
		return problem("parent_seq %d: want a sequence of the parent's history, below the fork's own %d", p.ParentSeq, ev.seq)
	}
	before, err := hasLogBetween(db, sid, 0, ev.seq)
	if err != nil {
		return nil, err
	}
	if before {
		return problem("session %s has events already: a fork starts a new session", sid)
	}
	segs, err := lineage(db, p.Parent)
	if err != nil {
		return nil, err
	}
	if len(segs) > MaxForkDepth {
		return problem("session %s is a fork of a fork: forks nest %d deep at most", p.Parent, MaxForkDepth)
	}
	var found bool
	for _, sg := range clip(segs, 0, p.ParentSeq) {
		if ok, err := hasLogBetween(db, sg.session, sg.from, sg.until+1); err != nil || ok {
			found = ok
			if err != nil {
				return nil, err
			}
			break
		}
	}
	if !found {
		return problem("session %s has no events up to seq %d", p.Parent, p.ParentSeq)
	}
	later, err := hasLogBetween(db, p.Parent, p.ParentSeq+1, ev.seq)
	if err != nil {
		return nil, err
	}
	if !later {
		seed.src = db
		return seed, nil
	}
	mem, _, _, err := s.foldAsOf(ctx, p.Parent, AsOf{Seq: p.ParentSeq})
	if err != nil {
		return nil, fmt.Errorf("fold session %s up to seq %d for its fork %s: %w", p.Parent, p.ParentSeq, sid, err)
	}
	seed.src, seed.mem = mem.db, mem
	return seed, nil
}

// hasLogBetween reports whether session sid's own log has an entry with a
// sequence in [from, to).
func hasLogBetween(r pebble.Reader, sid string, from, to uint64) (bool, error) {
	if to <= from {
		return false, nil
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: logKey(sid, from), UpperBound: logKey(sid, to)})
	if err != nil {
		return false, err
	}
	ok := it.First()
	return ok, errorsJoin(it.Error(), it.Close())
}

// logSegment is part of a session's history: one session's own log entries from
// from to until (inclusive; 0: no bound).
type logSegment struct {
	session     string
	from, until uint64
}

// lineage is a session's history as segments, oldest first: its ancestors'
// up to each fork point, then its own.
func lineage(r pebble.Reader, sid string) ([]logSegment, error) {
	return lineageDepth(r, sid, 0)
}

func lineageDepth(r pebble.Reader, sid string, depth int) ([]logSegment, error) {
	v, err := getFrom(r, forkKey(sid))
	if err != nil || v == nil {
		return []logSegment{{session: sid}}, err
	}
	if depth > MaxForkDepth {
		return nil, fmt.Errorf("session %s: forks nest deeper than %d", sid, MaxForkDepth)
	}
	var f ForkOf
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, fmt.Errorf("decode the fork record of %s: %w", sid, err)
	}
	parent, err := lineageDepth(r, f.Parent, depth+1)
	if err != nil {
		return nil, err
	}
	return append(clip(parent, 0, f.ParentSeq), logSegment{session: sid, from: f.Seq}), nil
}

// clip bounds segments to [from, until] (until 0: no bound), dropping the
// empty ones.
func clip(segs []logSegment, from, until uint64) []logSegment {
	out := make([]logSegment, 0, len(segs))
	for _, sg := range segs {
		sg.from = max(sg.from, from)
		if until > 0 && (sg.until == 0 || sg.until > until) {
			sg.until = until
		}
		if sg.until != 0 && sg.until < sg.from {
			continue
		}
		out = append(out, sg)
	}
	return out
}

// forkFor returns a fork event's seed, or nil after recording why
// projection p refuses it.
func forkFor(t *tx, ev *event, p string) (*forkSeed, error) {
	if ev.fork.problem != "" {
		return nil, t.reject(p, ev, "%s", ev.fork.problem)
	}
	return ev.fork, nil
}

// applyForkLog records a valid fork's lineage.
func applyForkLog(t *tx, ev *event) error {
	f, err := forkFor(t, ev, Log)
	if f == nil {
		return err
	}
	v, err := json.Marshal(ForkOf{Parent: f.p.Parent, ParentSeq: f.p.ParentSeq, Seq: ev.seq})
	if err != nil {
		return err
	}
	return t.set(forkKey(ev.env.SessionID), v)
}

// forkSession gives the fork the parent's session record as of the fork
// point, renamed.
func forkSession(t *tx, ev *event) error {
	f, err := forkFor(t, ev, Sessions)
	if f == nil {
		return err
	}
	v, err := getFrom(f.src, sessionKey(f.p.Parent))
	if err != nil {
		return err
	}
	if v == nil {
		return t.reject(Sessions, ev, "session %s was not created as of seq %d", f.p.Parent, f.p.ParentSeq)
	}
	s := &Session{}
	if err := json.Unmarshal(v, s); err != nil {
		return fmt.Errorf("decode session %s: %w", f.p.Parent, err)
	}
	s.ID = ev.env.SessionID
	if f.p.Name != "" {
		s.Name = f.p.Name
	}
	s.Fork = &ForkOf{Parent: f.p.Parent, ParentSeq: f.p.ParentSeq, Seq: ev.seq}
	s.CreatedSeq, s.UpdatedSeq, s.CreatedAt, s.LastActiveAt = ev.seq, ev.seq, ev.env.Timestamp, ev.env.Timestamp
	store(t, sessionKey(s.ID), s)
	return nil
}

// forkDAGs gives the fork the parent's DAGs as of the fork point. Nodes that
// were dispatched or running are ready again in the fork, unless the fork
// continues them.
func forkDAGs(t *tx, ev *event) error {
	f, err := forkFor(t, ev, DAGs)
	if f == nil {
		return err
	}
	sid := ev.env.SessionID
	var ids []string
	p := dagKey(f.p.Parent, "")
	if err := scanPrefix(f.src, p, func(k, _ []byte) error {
		ids = append(ids, string(k[len(p):]))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		o, err := readDAGObj(f.src, f.p.Parent, id)
		if err != nil || o == nil {
			return err
		}
		o.h.Session = sid
		for i := range o.nodes {
			if n := &o.nodes[i]; (n.state == stateDispatched || n.state == stateRunning) && !f.p.Continued {
				n.state = stateReady
				n.setTime(dispatchedAt, nil)
				n.setTime(startedAt, nil)
			}
		}
		o.indexNodes()
		o.prepare()
		o.touchAll()
		t.storeDAG(o)
		if err := t.set(dagIDKey(id, sid), nil); err != nil {
			return err
		}
		if o.h.State == DAGRunning {
			r, err := loadRunning(t)
			if err != nil {
				return err
			}
			r.add(sid, id)
			store(t, dagRunningKey, r)
		}
	}
	return nil
}

// forkCheckpoints gives the fork the parent's checkpoints as of the fork
// point.
func forkCheckpoints(t *tx, ev *event) error {
	f, err := forkFor(t, ev, Checkpoints)
	if f == nil {
		return err
	}
	sid := ev.env.SessionID
	kp := checkpointDAGKey(f.p.Parent, "")
	if err := scanPrefix(f.src, kp, func(k, v []byte) error {
		d := &cpDAG{}
		if err := json.Unmarshal(v, d); err != nil {
			return err
		}
		store(t, checkpointDAGKey(sid, string(k[len(kp):])), d)
		return nil
	}); err != nil {
		return err
	}
	return scanPrefix(f.src, checkpointsPrefix(f.p.Parent), func(_, v []byte) error {
		c := &Checkpoint{}
		if err := json.Unmarshal(v, c); err != nil {
			return err
		}
		c.Session = sid
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		return t.set(checkpointKey(sid, c.DAG, c.Seq), b)
	})
}

// forkPending gives the fork what waited on the user in the parent at the
// fork point, open or answered: a plan waiting for approval waits in the
// fork too.
func forkPending(t *tx, ev *event) error {
	f, err := forkFor(t, ev, Pending)
	if f == nil {
		return err
	}
	sid := ev.env.SessionID
	if err := scanPrefix(f.src, pendingPrefix(f.p.Parent), func(_, v []byte) error {
		r := &PendingRequest{}
		if err := json.Unmarshal(v, r); err != nil {
			return err
		}
		r.Session = sid
		store(t, pendingKey(sid, r.Correlation), r)
		return nil
	}); err != nil {
		return err
	}
	for _, prefix := range []string{"pending/id/", "pending/plan/"} {
		from := under(key(prefix, f.p.Parent))
		if err := scanPrefix(f.src, from, func(k, v []byte) error {
			var corr string
			if err := json.Unmarshal(v, &corr); err != nil {
				return err
			}
			store(t, key(prefix, sid, string(k[len(from):])), &corr)
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// isFork reports whether e is a fork event.
func (e *event) isFork() bool {
	return e.env != nil && e.env.Type == schemas.TypeSessionFork
}

// lineageLog returns a page of a session's history, following its lineage.
func lineageLog(r pebble.Reader, q LogQuery) (*LogPage, error) {
	segs, err := lineage(r, q.Session)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	page := &LogPage{Entries: []LogEntry{}}
	for _, sg := range clip(segs, q.From, q.Until) {
		sub := LogQuery{Session: sg.session, From: sg.from, Until: sg.until, UntilTime: q.UntilTime, Limit: limit - len(page.Entries)}
		p, stop, err := sessionLogPage(r, sub)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Entries {
			if sg.session != q.Session {
				e.From = sg.session
			}
			page.Entries = append(page.Entries, e)
		}
		if p.More {
			page.More, page.Next = true, p.Next
			return page, nil
		}
		if stop {
			return page, nil
		}
		if len(page.Entries) == limit {
			// The page is full: say where the next starts, if anything follows.
			for _, rest := range clip(segs, page.Entries[len(page.Entries)-1].Seq+1, q.Until) {
				it, err := r.NewIter(&pebble.IterOptions{LowerBound: logKey(rest.session, rest.from), UpperBound: logUpper(rest)})
				if err != nil {
					return nil, err
				}
				if it.First() {
					page.More, page.Next = true, seqSuffix(it.Key())
				}
				if err := errorsJoin(it.Error(), it.Close()); err != nil || page.More {
					return page, err
				}
			}
			return page, nil
		}
	}
	return page, nil
}

// logUpper is the upper bound of a logSegment's log keys.
func logUpper(sg logSegment) []byte {
	if sg.until == 0 {
		return prefixEnd(logPrefix(sg.session))
	}
	return prefixEnd(logKey(sg.session, sg.until))
}

// isLineageOf reports whether an event's session is one of the sessions a
// lineage's segments read.
func isLineageOf(segs []logSegment, sid string) bool {
	for _, sg := range segs {
		if sg.session == sid {
			return true
		}
	}
	return false
}
