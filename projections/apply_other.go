package projections

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// cpDAG is what the checkpoints projection knows of a DAG: its layer count and
// the layers checkpointed so far.
type cpDAG struct {
	Layers int `json:"layers"`
	// Done are the checkpointed layers as ascending, disjoint [first, last]
	// ranges. The Orchestrator checkpoints layers in order, so they are one
	// range: a checkpoint of a chain's 10,000th layer reads and writes as
	// little as its first one's (a list of every layer made each checkpoint
	// cost more than the one before).
	Done [][2]int `json:"done_ranges,omitempty"`
}

// UnmarshalJSON reads a cpDAG, also as stores written before the ranges
// kept it: every checkpointed layer listed under "done".
func (d *cpDAG) UnmarshalJSON(b []byte) error {
	var v struct {
		Layers int      `json:"layers"`
		Done   [][2]int `json:"done_ranges"`
		Listed []int    `json:"done"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	d.Layers, d.Done = v.Layers, v.Done
	for _, l := range v.Listed {
		d.add(l)
	}
	return nil
}

// search returns the index of the first range that ends at or after l.
func (d *cpDAG) search(l int) int {
	i, _ := slices.BinarySearchFunc(d.Done, l, func(r [2]int, l int) int { return cmp.Compare(r[1], l) })
	return i
}

// has reports whether layer l is checkpointed.
func (d *cpDAG) has(l int) bool {
	i := d.search(l)
	return i < len(d.Done) && d.Done[i][0] <= l
}

// add records layer l as checkpointed, merging it with the ranges it
// touches.
func (d *cpDAG) add(l int) {
	i := d.search(l)
	if i < len(d.Done) && d.Done[i][0] <= l {
		return
	}
	joinsPrev := i > 0 && d.Done[i-1][1] == l-1
	joinsNext := i < len(d.Done) && d.Done[i][0] == l+1
	switch {
	case joinsPrev && joinsNext:
		d.Done[i-1][1] = d.Done[i][1]
		d.Done = slices.Delete(d.Done, i, i+1)
	case joinsPrev:
		d.Done[i-1][1] = l
	case joinsNext:
		d.Done[i][0] = l
	default:
		d.Done = slices.Insert(d.Done, i, [2]int{l, l})
	}
}

// applyCheckpoints records checkpoint events. A checkpoint must name a DAG the
// session submitted (a valid one), a layer the DAG has, and a layer not
// checkpointed before.
func applyCheckpoints(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeSessionFork:
		return forkCheckpoints(t, ev)
	case schemas.TypeDAGExecute:
		p, err := payloadOf[schemas.DAGExecute](t, Checkpoints, ev)
		if p == nil {
			return err
		}
		layers, _, problems := Plan(p.DAG)
		if len(problems) > 0 {
			return nil
		}
		k := checkpointDAGKey(env.SessionID, p.DAG.ID)
		old, err := load[cpDAG](t, k)
		if err != nil || old != nil {
			return err
		}
		store(t, k, &cpDAG{Layers: len(layers)})
	case schemas.TypeCheckpoint:
		p, err := payloadOf[schemas.Checkpoint](t, Checkpoints, ev)
		if p == nil {
			return err
		}
		k := checkpointDAGKey(env.SessionID, p.DAGID)
		d, err := load[cpDAG](t, k)
		switch {
		case err != nil:
			return err
		case d == nil:
			return t.reject(Checkpoints, ev, "dag %s is unknown in session %s", p.DAGID, env.SessionID)
		case p.Layer < 0 || p.Layer >= d.Layers:
			return t.reject(Checkpoints, ev, "layer %d: dag %s has layers 0 to %d", p.Layer, p.DAGID, d.Layers-1)
		case d.has(p.Layer):
			return t.reject(Checkpoints, ev, "layer %d of dag %s is already checkpointed", p.Layer, p.DAGID)
		}
		d.add(p.Layer)
		store(t, k, d)
		c := Checkpoint{
			Session: env.SessionID, DAG: p.DAGID, Layer: p.Layer, Seq: ev.seq, ID: env.ID, At: env.Timestamp,
			Source: env.Source, Succeeded: p.Succeeded, Failed: p.Failed, Skipped: p.Skipped,
		}
		v, err := json.Marshal(&c)
		if err != nil {
			return err
		}
		return t.set(checkpointKey(env.SessionID, p.DAGID, ev.seq), v)
	}
	return nil
}

// applyPending tracks what waits on the user. clarification_request and
// plan_response open a request keyed by correlation id (the asker is the
// payload's asker, else the sender); clarification_response and user_response
// (by in_reply_to: a correlation id or the request's event id) answer a
// clarification; plan_approved and plan_modified settle a plan. Answering
// something that is not open is refused, except for a user_response, which may
// answer anything.
func applyPending(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	sid := env.SessionID
	corr := env.CorrelationID
	if corr == "" {
		corr = env.ID
	}
	switch env.Type {
	case schemas.TypeSessionFork:
		return forkPending(t, ev)
	case schemas.TypeClarificationRequest, schemas.TypePlanResponse:
		k := pendingKey(sid, corr)
		old, err := load[PendingRequest](t, k)
		if err != nil {
			return err
		}
		if old != nil && old.State == PendingOpen {
			return t.reject(Pending, ev, "%s %s already waits on the user in session %s (asked at seq %d)", old.Kind, corr, sid, old.Seq)
		}
		r := &PendingRequest{Correlation: corr, Session: sid, State: PendingOpen, Asker: env.Source, RequestID: env.ID, Seq: ev.seq, At: env.Timestamp}
		if env.Type == schemas.TypeClarificationRequest {
			p, err := payloadOf[schemas.ClarificationRequest](t, Pending, ev)
			if p == nil {
				return err
			}
			r.Kind, r.Question, r.Options, r.Context = KindClarification, p.Question, p.Options, p.Context
			if p.Asker != "" {
				r.Asker = p.Asker
			}
		} else {
			p, err := payloadOf[schemas.PlanResponse](t, Pending, ev)
			if p == nil {
				return err
			}
			r.Kind, r.PlanID, r.DAGID, r.Question = KindPlan, p.PlanID, p.DAG.ID, p.Rationale
			if p.PlanID != "" {
				store(t, pendingPlanKey(sid, p.PlanID), &corr)
			}
		}
		store(t, k, r)
		store(t, pendingAliasKey(sid, env.ID), &corr)
	case schemas.TypeClarificationResponse, schemas.TypeUserResponse:
		var ref, answer string
		if env.Type == schemas.TypeClarificationResponse {
			p, err := payloadOf[schemas.ClarificationResponse](t, Pending, ev)
			if p == nil {
				return err
			}
			ref, answer = p.InReplyTo, p.Answer
		} else {
			p, err := payloadOf[schemas.UserResponse](t, Pending, ev)
			if p == nil || p.InReplyTo == "" {
				return err
			}
			ref, answer = p.InReplyTo, p.Text
		}
		r, k, err := findPending(t, sid, ref, corr, "")
		if err != nil {
			return err
		}
		if r == nil || r.Kind != KindClarification || r.State != PendingOpen {
			if env.Type == schemas.TypeUserResponse {
				return nil
			}
			return t.reject(Pending, ev, "no open clarification %q in session %s", refOr(ref, corr), sid)
		}
		r.State, r.Answer, r.AnswerSeq, r.AnsweredBy = PendingAnswered, answer, ev.seq, env.Source
		store(t, k, r)
	case schemas.TypePlanApproved, schemas.TypePlanModified:
		var plan, state, answer string
		if env.Type == schemas.TypePlanApproved {
			p, err := payloadOf[schemas.PlanApproved](t, Pending, ev)
			if p == nil {
				return err
			}
			plan, state = p.PlanID, PendingApproved
		} else {
			p, err := payloadOf[schemas.PlanModified](t, Pending, ev)
			if p == nil {
				return err
			}
			plan, state, answer = p.PlanID, PendingModified, p.Feedback
			if p.Rejected {
				state = PendingRejected
			}
		}
		r, k, err := findPending(t, sid, "", corr, plan)
		if err != nil {
			return err
		}
		if r == nil || r.Kind != KindPlan || r.State != PendingOpen {
			return t.reject(Pending, ev, "no plan %q waits for approval in session %s", refOr(plan, corr), sid)
		}
		r.State, r.Answer, r.AnswerSeq, r.AnsweredBy = state, answer, ev.seq, env.Source
		store(t, k, r)
	}
	return nil
}

func refOr(ref, corr string) string {
	if ref != "" {
		return ref
	}
	return corr
}

// findPending finds a request by plan id, by ref as a correlation or request
// event id, or else by the answer's own correlation id.
func findPending(t *tx, sid, ref, corr, plan string) (*PendingRequest, []byte, error) {
	var cands []string
	if plan != "" {
		c, err := load[string](t, pendingPlanKey(sid, plan))
		if err != nil {
			return nil, nil, err
		}
		if c != nil {
			cands = append(cands, *c)
		}
	}
	if ref != "" {
		cands = append(cands, ref)
		c, err := load[string](t, pendingAliasKey(sid, ref))
		if err != nil {
			return nil, nil, err
		}
		if c != nil {
			cands = append(cands, *c)
		}
	}
	if ref == "" && plan == "" {
		cands = append(cands, corr)
	}
	for _, c := range cands {
		k := pendingKey(sid, c)
		r, err := load[PendingRequest](t, k)
		if err != nil {
			return nil, nil, err
		}
		if r != nil && r.State == PendingOpen {
			return r, k, nil
		}
	}
	return nil, nil, nil
}

// applyLog files each event's bytes under its session, so reading one session
// is a range scan (an index_update's without its payload: see logValue). A session_switch is filed under the session it suspends too,
// and a scope-all signal in the global log, so a session's log holds every
// event that changed it.
func applyLog(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return t.reject(Log, ev, "not an envelope: %v", ev.err)
	}
	if err := t.setSeqKey("log/s/", env.SessionID, ev.seq, logValue(ev)); err != nil {
		return err
	}
	switch env.Type {
	case schemas.TypeSessionFork:
		return applyForkLog(t, ev)
	case schemas.TypeSessionSwitch:
		v, err := ev.decode()
		if err != nil {
			return nil
		}
		if p := v.(*schemas.SessionSwitch); p.From != "" && p.From != env.SessionID && schemas.ValidName(p.From) {
			return t.set(logKey(p.From, ev.seq), ev.data)
		}
	case schemas.TypeSignal:
		v, err := ev.decode()
		if err != nil {
			return nil
		}
		if v.(*schemas.Signal).Scope == schemas.ScopeAll {
			return t.set(globalLogKey(ev.seq), ev.data)
		}
	}
	return nil
}

// applyTrace files each event under its correlation id (its own id if it has
// none); the hop's details are read back from the session log.
func applyTrace(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	corr := env.CorrelationID
	if corr == "" {
		corr = env.ID
	}
	t.vbuf = append(t.vbuf[:0], env.SessionID...) // the batch copies it
	return t.setSeqKey("trace/", corr, ev.seq, t.vbuf)
}

// callRec is a recorded side effect: the sequence of its event and the
// payload's msgpack bytes.
type callRec struct {
	seq     uint64
	payload []byte
}

func (c *callRec) encode(b *pebble.Batch, k []byte, s *scratch) error {
	s.val = append(binary.BigEndian.AppendUint64(s.val[:0], c.seq), c.payload...)
	return b.Set(k, s.val, nil)
}

func loadCall(t *tx, k []byte) (*callRec, error) {
	if e, ok := t.cache.get(k); ok {
		if e.obj == nil {
			return nil, nil
		}
		return e.obj.(*callRec), nil
	}
	if t.calls.absent(k) {
		t.missing(k)
		return nil, nil
	}
	raw, err := t.getRaw(k)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		t.missing(k)
		return nil, nil
	}
	c := &callRec{seq: getUint64(raw), payload: raw[8:]}
	t.cache.put(k, c, false)
	return c, nil
}

// applyCalls indexes tool results, LLM responses, skill selections and hook
// decisions by call id, so a redelivered message finds the recorded side effect
// instead of repeating it.
// The first record of a call id stands; a second is refused.
func applyCalls(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	var call string
	var k []byte
	switch env.Type {
	case schemas.TypeToolResult:
		p, err := payloadOf[schemas.ToolResult](t, Calls, ev)
		if p == nil {
			return err
		}
		call, k = p.CallID, toolCallKey(p.CallID)
	case schemas.TypeLLMResponse:
		p, err := payloadOf[schemas.LLMResponse](t, Calls, ev)
		if p == nil {
			return err
		}
		call, k = p.CallID, llmCallKey(p.CallID)
	case schemas.TypeSkillsSelected:
		p, err := payloadOf[schemas.SkillsSelected](t, Calls, ev)
		if p == nil {
			return err
		}
		call, k = p.CallID, skillsCallKey(p.CallID)
	case schemas.TypeHookDecision:
		p, err := payloadOf[schemas.HookDecision](t, Calls, ev)
		if p == nil {
			return err
		}
		call, k = p.CallID, hookCallKey(p.CallID)
	default:
		return nil
	}
	if call == "" {
		return t.reject(Calls, ev, "%s without a call id", env.Type)
	}
	old, err := loadCall(t, k)
	if err != nil {
		return err
	}
	if old != nil {
		return t.reject(Calls, ev, "%s of call %s already recorded at seq %d", env.Type, call, old.seq)
	}
	t.calls.add(k)
	t.cache.putTransient(k, &callRec{seq: ev.seq, payload: env.Payload})
	return nil
}
