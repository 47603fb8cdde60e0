package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Reader answers queries on projected state. *Store answers from its own
// Pebble; the api package's Client asks the server that owns the store over
// NATS. Both return the same values, and errors wrapping the same sentinels
// (ErrNotFound with the id that was not found, ErrAmbiguous, ErrInvalidQuery).
type Reader interface {
	// Session returns one session.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions lists sessions in creation order.
	Sessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	// DAG returns a DAG by id; ErrAmbiguous if several sessions have one.
	DAG(ctx context.Context, id string) (*DAG, error)
	// SessionDAG returns the DAG id of one session.
	SessionDAG(ctx context.Context, session, id string) (*DAG, error)
	// DAGs lists DAGs in submission order.
	DAGs(ctx context.Context, f DAGFilter) ([]*DAG, error)
	// Checkpoints lists a session's checkpoints (of one DAG if dag is set) in
	// stream order.
	Checkpoints(ctx context.Context, session, dag string) ([]*Checkpoint, error)
	// Pending lists the open requests waiting on the user ("" session: all).
	Pending(ctx context.Context, session string) ([]*PendingRequest, error)
	// PendingRequest returns a request, open or answered, by correlation id or
	// by the request event's id.
	PendingRequest(ctx context.Context, session, ref string) (*PendingRequest, error)
	// Permits lists permission requests; Permit returns one by id;
	// PermitGrants lists the remembered answers.
	Permits(ctx context.Context, f PermitFilter) ([]*Permit, error)
	Permit(ctx context.Context, id string) (*Permit, error)
	PermitGrants(ctx context.Context) ([]*PermitGrant, error)
	// SessionLog returns a page of one session's events in stream order.
	SessionLog(ctx context.Context, q LogQuery) (*LogPage, error)
	// SessionAsOf folds one session's events up to a point.
	SessionAsOf(ctx context.Context, session string, until AsOf) (*SessionView, error)
	// Trace returns the hops of a correlation id.
	Trace(ctx context.Context, correlation string) (*Trace, error)
	// ToolResult and LLMResponse return a recorded side effect by call id and
	// the sequence of its event.
	ToolResult(ctx context.Context, callID string) (*schemas.ToolResult, uint64, error)
	LLMResponse(ctx context.Context, callID string) (*schemas.LLMResponse, uint64, error)
	// Embeddings returns the recorded embeddings of keys
	// (schemas.EmbeddingKey) by key; keys with none are absent.
	Embeddings(ctx context.Context, keys []string) (map[string]*schemas.Embedding, error)
	// History lists what the Archivalist recorded, newest first; a query
	// that contradicts itself is an error wrapping ErrInvalidQuery.
	History(ctx context.Context, q HistoryQuery) ([]*HistoryEntry, error)
	// Failures lists the failure memories, the most frequent first.
	Failures(ctx context.Context, q FailureQuery) ([]*FailureMemory, error)
	// Code answers a query on the code index of a work directory.
	Code(ctx context.Context, q CodeQuery) (*CodeResult, error)
	// Docs answers a query on the documents the Academic ingested.
	Docs(ctx context.Context, q DocsQuery) (*DocsResult, error)
	// Graph answers a query on the knowledge graph.
	Graph(ctx context.Context, q GraphQuery) (*GraphResult, error)
	// Pipeline and Pipelines read single-worker pipelines; VariantGroup and
	// VariantGroups their variant groups (f.State is ignored).
	Pipeline(ctx context.Context, id string) (*Pipeline, error)
	Pipelines(ctx context.Context, f PipelineFilter) ([]*Pipeline, error)
	VariantGroup(ctx context.Context, id string) (*VariantGroup, error)
	VariantGroups(ctx context.Context, f PipelineFilter) ([]*VariantGroup, error)
	// PlanMode returns a session's plan mode.
	PlanMode(ctx context.Context, session string) (*PlanMode, error)
	// Rejections lists refused events.
	Rejections(ctx context.Context, f RejectionFilter) ([]*Rejection, error)
	// Loadout returns the skills and tools one agent loaded in a session;
	// Loadouts lists a session's, by agent.
	Loadout(ctx context.Context, session, agent string) (*Loadout, error)
	Loadouts(ctx context.Context, session string) ([]*Loadout, error)
	// Schedule returns a schedule by name (a removed one too); Schedules
	// lists them by name.
	Schedule(ctx context.Context, name string) (*Schedule, error)
	Schedules(ctx context.Context) ([]*Schedule, error)
	// Audit lists the audit entries a query selects, oldest first; an
	// unusable query is an error wrapping ErrInvalidQuery.
	Audit(ctx context.Context, q AuditQuery) ([]*AuditEntry, error)
	// Status reports cursors, lag and sizes.
	Status(ctx context.Context) (*Status, error)
	// WaitFor blocks until the projections have applied seq.
	WaitFor(ctx context.Context, seq uint64) error
}

var _ Reader = (*Store)(nil)

// RejectionFilter selects rejections; zero fields match all.
type RejectionFilter struct {
	Projection string `json:"projection,omitempty"`
	Session    string `json:"session,omitempty"`
	// Seq selects the rejections of one event.
	Seq   uint64 `json:"seq,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// notFound is ErrNotFound for the record what with id. Agents look up a
// call's record before every side effect and nearly always miss, so the
// message is formatted only when someone reads it.
func notFound(what, id string) error { return &missing{what: what, id: id} }

// missing is notFound's error: "what "id": not found", and ErrNotFound to
// errors.Is.
type missing struct{ what, id string }

func (m *missing) Error() string {
	return m.what + " " + strconv.Quote(m.id) + ": " + ErrNotFound.Error()
}

func (m *missing) Unwrap() error { return ErrNotFound }

func (s *Store) snapshot() (*pebble.Snapshot, error) {
	if s.isClosed() {
		return nil, ErrClosed
	}
	return s.db.NewSnapshot(), nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// scanPrefix calls fn for each key under prefix, in order. fn's key and value
// are valid only during the call.
func scanPrefix(r pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	return scanRange(r, prefix, prefixEnd(prefix), fn)
}

// scanRange calls fn for each key in [lo, hi), in order.
func scanRange(r pebble.Reader, lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	return errorsJoin(it.Error(), it.Close())
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// Session returns the session with id.
func (s *Store) Session(ctx context.Context, id string) (*Session, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	v, err := getFrom(snap, sessionKey(id))
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, notFound("session", id)
	}
	sess := &Session{}
	if err := json.Unmarshal(v, sess); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", id, err)
	}
	e, err := newEnricher(snap)
	if err != nil {
		return nil, err
	}
	defer e.close()
	return sess, e.enrich(sess)
}

// Sessions lists the sessions in creation order.
func (s *Store) Sessions(ctx context.Context, f SessionFilter) ([]*Session, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var out []*Session
	err = scanPrefix(snap, sessionsPrefix, func(_, v []byte) error {
		sess := &Session{}
		if err := json.Unmarshal(v, sess); err != nil {
			return err
		}
		if f.State == "" || sess.State == f.State {
			out = append(out, sess)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Session) int { return cmpU64(a.CreatedSeq, b.CreatedSeq) })
	e, err := newEnricher(snap)
	if err != nil {
		return nil, err
	}
	defer e.close()
	for _, sess := range out {
		if err := e.enrich(sess); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// enricher fills in a session's read-time fields from other keys.
type enricher struct {
	r      pebble.Reader
	focus  string
	global bool
	it     *pebble.Iterator
}

func newEnricher(r pebble.Reader) (*enricher, error) {
	e := &enricher{r: r}
	if v, err := getFrom(r, focusKey); err != nil {
		return nil, err
	} else if v != nil {
		var f focus
		if err := json.Unmarshal(v, &f); err != nil {
			return nil, err
		}
		e.focus = f.Session
	}
	if v, err := getFrom(r, globalPauseKey); err != nil {
		return nil, err
	} else if v != nil {
		var g globalPause
		if err := json.Unmarshal(v, &g); err != nil {
			return nil, err
		}
		e.global = g.Paused
	}
	p := []byte("log/s/")
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, err
	}
	e.it = it
	return e, nil
}

func (e *enricher) close() { e.it.Close() }

func (e *enricher) enrich(sess *Session) error {
	sess.Focused = sess.ID == e.focus
	sess.Paused = sess.Paused || e.global
	if e.it.SeekLT(prefixEnd(logPrefix(sess.ID))) && bytes.HasPrefix(e.it.Key(), logPrefix(sess.ID)) {
		sess.LastSeq = seqSuffix(e.it.Key())
		if env, err := logEnvelope(e.it.Value()); err == nil && env.Timestamp.After(sess.LastActiveAt) {
			sess.LastActiveAt = env.Timestamp
		}
	}
	return e.it.Error()
}

// DAG returns the DAG with id; ErrAmbiguous when sessions share the id.
func (s *Store) DAG(ctx context.Context, id string) (*DAG, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var sessions []string
	p := dagIDPrefix(id)
	if err := scanPrefix(snap, p, func(k, _ []byte) error {
		sessions = append(sessions, string(k[len(p):]))
		return nil
	}); err != nil {
		return nil, err
	}
	switch len(sessions) {
	case 0:
		return nil, notFound("dag", id)
	case 1:
	default:
		return nil, fmt.Errorf("dag %q is in sessions %s: %w (name the session)", id, strings.Join(sessions, ", "), ErrAmbiguous)
	}
	return s.sessionDAG(snap, sessions[0], id)
}

// SessionDAG returns the DAG id of one session.
func (s *Store) SessionDAG(ctx context.Context, session, id string) (*DAG, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return s.sessionDAG(snap, session, id)
}

func (s *Store) sessionDAG(r pebble.Reader, session, id string) (*DAG, error) {
	d, err := readDAG(r, session, id)
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, notFound("dag", id)
	}
	summarize(d)
	return d, nil
}

// DAGs lists DAGs in submission order.
func (s *Store) DAGs(ctx context.Context, f DAGFilter) ([]*DAG, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	p := dagHeaderPrefix
	if f.Session != "" {
		p = dagKey(f.Session, "") // dags/d/<sid>\0
	}
	type ref struct{ sid, id string }
	var refs []ref
	if err := scanPrefix(snap, p, func(k, _ []byte) error {
		rest := k[len(dagHeaderPrefix):]
		i := bytes.IndexByte(rest, sep)
		if i < 0 {
			return nil
		}
		refs = append(refs, ref{string(rest[:i]), string(rest[i+1:])})
		return nil
	}); err != nil {
		return nil, err
	}
	var out []*DAG
	for _, r := range refs {
		d, err := s.sessionDAG(snap, r.sid, r.id)
		if err != nil {
			return nil, err
		}
		if f.State == "" || d.State == f.State {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b *DAG) int { return cmpU64(a.CreatedSeq, b.CreatedSeq) })
	return out, nil
}

// Checkpoints lists a session's checkpoints, of one DAG if dag is not "", in
// stream order.
func (s *Store) Checkpoints(ctx context.Context, session, dag string) ([]*Checkpoint, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	p := checkpointsPrefix(session)
	if dag != "" {
		p = checkpointsDAGPrefix(session, dag)
	}
	out := []*Checkpoint{}
	if err := scanPrefix(snap, p, func(_, v []byte) error {
		c := &Checkpoint{}
		if err := json.Unmarshal(v, c); err != nil {
			return err
		}
		out = append(out, c)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *Checkpoint) int { return cmpU64(a.Seq, b.Seq) })
	return out, nil
}

// Pending lists the open requests waiting on the user, oldest first; session
// "" lists every session's.
func (s *Store) Pending(ctx context.Context, session string) ([]*PendingRequest, error) {
	all, err := s.pendingAll(session)
	if err != nil {
		return nil, err
	}
	out := []*PendingRequest{}
	for _, r := range all {
		if r.State == PendingOpen {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *Store) pendingAll(session string) ([]*PendingRequest, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	p := []byte("pending/p/")
	if session != "" {
		p = pendingPrefix(session)
	}
	var out []*PendingRequest
	if err := scanPrefix(snap, p, func(_, v []byte) error {
		r := &PendingRequest{}
		if err := json.Unmarshal(v, r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *PendingRequest) int { return cmpU64(a.Seq, b.Seq) })
	return out, nil
}

// PendingRequest returns a request, open or answered, by correlation id or by
// the request event's id: who asked, and whether it has its answer.
func (s *Store) PendingRequest(ctx context.Context, session, ref string) (*PendingRequest, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	if r, err := pendingAt(snap, session, ref); r != nil || err != nil {
		return r, err
	}
	v, err := getFrom(snap, pendingAliasKey(session, ref))
	if err != nil || v == nil {
		return nil, errorsJoin(err, notFound("pending request", ref))
	}
	var corr string
	if err := json.Unmarshal(v, &corr); err != nil {
		return nil, err
	}
	r, err := pendingAt(snap, session, corr)
	if r == nil && err == nil {
		err = notFound("pending request", ref)
	}
	return r, err
}

func pendingAt(r pebble.Reader, session, corr string) (*PendingRequest, error) {
	v, err := getFrom(r, pendingKey(session, corr))
	if err != nil || v == nil {
		return nil, err
	}
	p := &PendingRequest{}
	return p, json.Unmarshal(v, p)
}

// SessionLog returns a page of one session's events in stream order.
func (s *Store) SessionLog(ctx context.Context, q LogQuery) (*LogPage, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	page, err := sessionLog(snap, q)
	snap.Close() // not held while the stream is read
	if err != nil {
		return nil, err
	}
	return page, s.logBodies(ctx, page.Entries)
}

func sessionLog(r pebble.Reader, q LogQuery) (*LogPage, error) {
	if q.Global {
		page, _, err := logPage(r, globalLogPrefix, globalLogKey, q)
		return page, err
	}
	return lineageLog(r, q)
}

// sessionLogPage reads a page of one session's own log; stop says an event
// after q.UntilTime ended it.
func sessionLogPage(r pebble.Reader, q LogQuery) (*LogPage, bool, error) {
	return logPage(r, logPrefix(q.Session), func(seq uint64) []byte { return logKey(q.Session, seq) }, q)
}

// logPage reads a page of the log under prefix, whose keys keyOf makes.
func logPage(r pebble.Reader, prefix []byte, keyOf func(uint64) []byte, q LogQuery) (*LogPage, bool, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLogLimit
	}
	lo, hi := prefix, prefixEnd(prefix)
	if q.From > 0 {
		lo = keyOf(q.From)
	}
	if q.Until > 0 {
		hi = prefixEnd(keyOf(q.Until))
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	page := &LogPage{Entries: []LogEntry{}}
	for it.First(); it.Valid(); it.Next() {
		seq := seqSuffix(it.Key())
		if !q.UntilTime.IsZero() {
			env, err := logEnvelope(it.Value())
			if err == nil && env.Timestamp.After(q.UntilTime) {
				return page, true, it.Error()
			}
		}
		if len(page.Entries) == limit {
			page.More, page.Next = true, seq
			break
		}
		page.Entries = append(page.Entries, LogEntry{Seq: seq, Data: append([]byte(nil), it.Value()...)})
	}
	return page, false, it.Error()
}

// Trace returns every hop of a correlation id, with the confidence chain and
// reroutes as of its last hop.
func (s *Store) Trace(ctx context.Context, correlation string) (*Trace, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	t := &Trace{Correlation: correlation, Hops: []Hop{}, Sessions: []string{}}
	err = scanPrefix(snap, tracePrefix(correlation), func(k, v []byte) error {
		seq, sid := seqSuffix(k), string(v)
		data, err := getFrom(snap, logKey(sid, seq))
		if err != nil || data == nil {
			return err
		}
		env, err := logEnvelope(data)
		if err != nil {
			return nil
		}
		h := Hop{Seq: seq, ID: env.ID, Parent: env.ParentID, Session: sid, Type: env.Type, Source: env.Source, Target: env.Target, At: env.Timestamp}
		if n := len(env.ConfidenceChain); n > 0 {
			c := env.ConfidenceChain[n-1]
			h.Confidence = &c
			if n >= len(t.Chain) {
				t.Chain = env.ConfidenceChain
			}
		}
		if len(env.RerouteHistory) >= len(t.Reroutes) {
			t.Reroutes = env.RerouteHistory
		}
		if t.Intent == nil {
			t.Intent = env.StructuredIntent
		}
		if !slices.Contains(t.Sessions, sid) {
			t.Sessions = append(t.Sessions, sid)
		}
		t.Hops = append(t.Hops, h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.Hops) == 0 {
		return nil, notFound("correlation", correlation)
	}
	t.Confidence = 1
	for _, c := range t.Chain {
		t.Confidence *= c.Confidence
	}
	return t, nil
}

// ToolResult returns the recorded result of a tool call and the sequence of
// its event; ErrNotFound if none is recorded.
func (s *Store) ToolResult(ctx context.Context, callID string) (*schemas.ToolResult, uint64, error) {
	seq, env, err := s.call(toolCallKey(callID), schemas.TypeToolResult, callID)
	if err != nil {
		return nil, 0, err
	}
	r, err := schemas.PayloadAs[schemas.ToolResult](env)
	return r, seq, err
}

// LLMResponse returns the recorded response of an LLM call and the sequence of
// its event; ErrNotFound if none is recorded.
func (s *Store) LLMResponse(ctx context.Context, callID string) (*schemas.LLMResponse, uint64, error) {
	seq, env, err := s.call(llmCallKey(callID), schemas.TypeLLMResponse, callID)
	if err != nil {
		return nil, 0, err
	}
	r, err := schemas.PayloadAs[schemas.LLMResponse](env)
	return r, seq, err
}

// HookDecision returns the recorded decision of the hooks at one point
// invocation and the sequence of its event; ErrNotFound if none is recorded.
func (s *Store) HookDecision(ctx context.Context, callID string) (*schemas.HookDecision, uint64, error) {
	seq, env, err := s.call(hookCallKey(callID), schemas.TypeHookDecision, callID)
	if err != nil {
		return nil, 0, err
	}
	r, err := schemas.PayloadAs[schemas.HookDecision](env)
	return r, seq, err
}

func (s *Store) call(k []byte, t schemas.Type, id string) (uint64, *schemas.Envelope, error) {
	if s.calls.absent(k) {
		return 0, nil, notFound(string(t)+" of call", id)
	}
	v, err := s.get(k)
	if err != nil {
		return 0, nil, err
	}
	if len(v) < 8 {
		return 0, nil, notFound(string(t)+" of call", id)
	}
	return getUint64(v), &schemas.Envelope{Type: t, Payload: v[8:]}, nil
}

// Rejections lists refused events in stream order.
func (s *Store) Rejections(ctx context.Context, f RejectionFilter) ([]*Rejection, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	out := []*Rejection{}
	for _, p := range projectionList {
		if f.Projection != "" && f.Projection != p.name {
			continue
		}
		if f.Seq != 0 {
			v, err := getFrom(snap, rejectionKey(p.name, f.Seq))
			if err != nil {
				return nil, err
			}
			if v != nil {
				r := &Rejection{}
				if err := json.Unmarshal(v, r); err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			continue
		}
		if err := scanPrefix(snap, rejectionPrefix(p.name), func(_, v []byte) error {
			r := &Rejection{}
			if err := json.Unmarshal(v, r); err != nil {
				return err
			}
			if f.Session == "" || r.Session == f.Session {
				out = append(out, r)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b *Rejection) int { return cmpU64(a.Seq, b.Seq) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Status reports each projection's cursor, lag, size and rejections.
func (s *Store) Status(ctx context.Context) (*Status, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	s.mu.Lock()
	st := &Status{Applied: s.appliedLocked(), StreamLast: s.streamLast, Ready: s.ready, StartupSeconds: s.startup.Seconds(), Dir: s.opts.Dir}
	if s.rebuild != nil {
		r := *s.rebuild
		st.Rebuild = &r
	}
	cursors := make(map[string]uint64, len(s.cursors))
	for k, v := range s.cursors {
		cursors[k] = v
	}
	s.mu.Unlock()
	st.StreamLast = max(st.StreamLast, st.Applied)
	for _, p := range projectionList {
		ps := ProjectionStatus{Name: p.name, Version: p.version, Cursor: cursors[p.name]}
		ps.Lag = st.StreamLast - min(ps.Cursor, st.StreamLast)
		size, err := s.db.EstimateDiskUsage(p.prefix(), prefixEnd(p.prefix()))
		if err != nil {
			return nil, err
		}
		ps.SizeBytes = size
		if err := scanPrefix(snap, rejectionPrefix(p.name), func(_, _ []byte) error {
			ps.Rejected++
			return nil
		}); err != nil {
			return nil, err
		}
		st.Projections = append(st.Projections, ps)
	}
	return st, nil
}

// Dump calls fn with every key and value of the store in key order, in chunks
// of about chunkBytes, from one snapshot. The slices are fn's only during the
// call. Benchmarks use it to write the same keys elsewhere.
func (s *Store) Dump(fn func(kvs [][2][]byte) error, chunkBytes int) error {
	snap, err := s.snapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	it, err := snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var arena []byte
	var kvs [][2][]byte
	flush := func() error {
		if len(kvs) == 0 {
			return nil
		}
		err := fn(kvs)
		arena, kvs = arena[:0], kvs[:0]
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if len(arena)+len(it.Key())+len(it.Value()) > cap(arena) {
			if err := flush(); err != nil {
				return err
			}
			if cap(arena) < chunkBytes {
				arena = make([]byte, 0, max(chunkBytes, len(it.Key())+len(it.Value())))
			}
		}
		k := len(arena)
		arena = append(arena, it.Key()...)
		v := len(arena)
		arena = append(arena, it.Value()...)
		kvs = append(kvs, [2][]byte{arena[k:v:v], arena[v:len(arena):len(arena)]})
	}
	if err := it.Error(); err != nil {
		return err
	}
	return flush()
}
