package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// AuditEntry is one line of the audit log (seed L13475-13520): an event the
// audit categories cover, seen as who did what to what, and how it ended.
// Most are the runtime's own envelopes read this way (a session's start, an
// LLM call, a tool call and its result); audit_record events add what no
// other event says (a file write's size and hash, a process kill, a
// denial).
type AuditEntry struct {
	Seq      uint64            `json:"seq"`
	ID       string            `json:"id"`
	Type     schemas.Type      `json:"type"`
	At       time.Time         `json:"at"`
	Category string            `json:"category"`
	Action   string            `json:"action"`
	Session  string            `json:"session"`
	Agent    string            `json:"agent"`
	Target   string            `json:"target,omitempty"`
	Outcome  string            `json:"outcome"`
	Reason   string            `json:"reason,omitempty"`
	Details  map[string]string `json:"details,omitempty"`
}

// Audit keys end in the entry's time (12 bytes, see appendTime) and stream
// sequence, so every index lists entries in time order and a --since seeks.
//
// An entry is stored once, under its category (audit/c/<category>\0<suffix>):
// every entry has exactly one, so the category's keys are both its index and
// the entries. The session, agent and outcome indexes name the category in
// their value. Four keys an entry made a third of a rebuild's keys.
const auditSuffixLen = 12 + 8

// appendAuditSuffix appends the suffix of the entry of seq at at to b.
func appendAuditSuffix(b []byte, at time.Time, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendTime(b, at), seq)
}

// auditEntryKey is the key of the entry of category filed under suffix.
func auditEntryKey(category string, suffix []byte) []byte {
	return appendAuditIndexKey(nil, 'c', category, suffix)
}

// auditIndexPrefix is the prefix of index dim ('c' category: the entries,
// 's' session, 'a' agent, 'o' outcome) for value.
func auditIndexPrefix(dim byte, value string) []byte {
	return appendAuditIndexKey(nil, dim, value, nil)
}

// appendAuditIndexKey appends the key of index dim for value and the entry
// filed under suffix to b.
func appendAuditIndexKey(b []byte, dim byte, value string, suffix []byte) []byte {
	b = append(b, "audit/"...)
	b = append(b, dim, '/')
	b = append(b, value...)
	b = append(b, sep)
	return append(b, suffix...)
}
func auditCallKey(call string) []byte { return key("audit/call/", call) }

// encode writes a pending tool call's entry (see auditToolCall) under its
// category and under the call's key k.
func (e *AuditEntry) encode(b *pebble.Batch, k []byte, s *scratch) error {
	s.val = appendAuditEntry(s.val[:0], e)
	s.key = appendAuditEntryKey(s.key[:0], e)
	if err := b.Set(s.key, s.val, nil); err != nil {
		return err
	}
	return b.Set(k, s.val, nil)
}

// appendAuditEntryKey appends the key e is filed under to b.
func appendAuditEntryKey(b []byte, e *AuditEntry) []byte {
	return appendAuditSuffix(appendAuditIndexKey(b, 'c', e.Category, nil), e.At, e.Seq)
}

// fileAuditEntry writes e under its category.
func fileAuditEntry(t *tx, e *AuditEntry) error {
	t.vbuf = appendAuditEntry(t.vbuf[:0], e)
	t.kbuf = appendAuditEntryKey(t.kbuf[:0], e)
	return t.set(t.kbuf, t.vbuf)
}

// applyAudit files the events the audit categories cover. An entry is
// written once under its category and indexed by session, agent and, when
// it is not allowed, outcome. A tool call's entry is completed by its result
// (outcome, exit code), so each call is one entry.
func applyAudit(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	if env.Type == schemas.TypeToolResult {
		return auditToolResult(t, ev)
	}
	var e AuditEntry // on the stack unless it waits for a result
	if ok, err := auditOf(t, ev, &e); !ok {
		return err
	}
	e.Seq, e.ID, e.Type, e.At, e.Session = ev.seq, env.ID, env.Type, env.Timestamp, env.SessionID
	if e.Agent == "" {
		e.Agent = env.Source
	}
	var err error
	if env.Type == schemas.TypeToolCall {
		err = auditToolCall(t, &e)
	} else {
		err = fileAuditEntry(t, &e)
	}
	if err != nil {
		return err
	}
	var buf [auditSuffixLen]byte // the fold files an entry without allocating its suffix
	return auditIndex(t, &e, appendAuditSuffix(buf[:0], e.At, e.Seq), e.Outcome != schemas.OutcomeAllowed)
}

// auditToolCall keeps a tool call's entry under the call's key
// (audit/call/<id>) until its result changes it: a transient cached object
// (it leaves the cache once committed), stored when a flush comes first in the
// entry's own form, under its category too (where queries see it), and read
// back from the call's key by the result. A call and its result folded in the
// same batch, as a rebuild's mostly are, cost one cached object and one write
// of the entry; a cached entry of its own, with the call's record pointing at
// it, was half of the audit projection's fold.
//
// A tool run cut off by a crash is called again under the same call id, and
// the new call's entry replaces the old one there. The old entry must end up
// written however the events were batched: a live fold flushed it long
// before the new call, so when it is still only in memory (folded in the
// same batch, as a rebuild does), it is written now.
func auditToolCall(t *tx, e *AuditEntry) error {
	entry := *e
	if old, _ := t.cache.putTransient(auditCallKey(e.Details["call"]), &entry).(*AuditEntry); old != nil {
		return fileAuditEntry(t, old)
	}
	return nil
}

// loadAuditEntry is load for a pending call's entry: cached, else decoded
// from its stored form.
func loadAuditEntry(t *tx, k []byte) (*AuditEntry, error) {
	if c, ok := t.cache.get(k); ok {
		e, _ := c.obj.(*AuditEntry)
		return e, nil
	}
	raw, err := t.getRaw(k)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		t.missing(k)
		return nil, nil
	}
	e, err := decodeAuditEntry(raw)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", k, err)
	}
	t.cache.put(k, e, false)
	return e, nil
}

// auditEntryFormat is the first byte of a stored entry. Entries are stored
// in this compact binary form, not JSON: one is written for about every
// fourth event of a busy stream, and encoding/json was half of the audit
// projection's cost to a rebuild.
const auditEntryFormat = 1

// appendAuditEntry appends e's stored form: the format, the sequence and
// time (Unix nanoseconds) as uvarints, then its strings and its details (sorted by name), each
// with its length.
func appendAuditEntry(b []byte, e *AuditEntry) []byte {
	b = append(b, auditEntryFormat)
	b = binary.AppendUvarint(b, e.Seq)
	b = binary.AppendUvarint(b, uint64(e.At.UnixNano()))
	for _, s := range [...]string{e.ID, string(e.Type), e.Category, e.Action, e.Session, e.Agent, e.Target, e.Outcome, e.Reason} {
		b = appendAuditString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Details)))
	var names [8]string // entries have a few details: sorted without allocating
	keys := names[:0]
	for k := range e.Details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendAuditString(appendAuditString(b, k), e.Details[k])
	}
	return b
}

func appendAuditString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeAuditEntry reads an entry appendAuditEntry stored.
func decodeAuditEntry(v []byte) (*AuditEntry, error) {
	if len(v) == 0 || v[0] != auditEntryFormat {
		return nil, fmt.Errorf("audit entry: not format %d", auditEntryFormat)
	}
	d := auditDecoder{b: v[1:]}
	e := &AuditEntry{Seq: d.uvarint(), At: time.Unix(0, int64(d.uvarint())).UTC()}
	for _, s := range [...]*string{&e.ID, (*string)(&e.Type), &e.Category, &e.Action, &e.Session, &e.Agent, &e.Target, &e.Outcome, &e.Reason} {
		*s = d.str()
	}
	if n := d.uvarint(); n > 0 && d.err == nil {
		e.Details = make(map[string]string, min(n, uint64(len(d.b))))
		for i := uint64(0); i < n && d.err == nil; i++ {
			k := d.str()
			e.Details[k] = d.str()
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the entry", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("audit entry: %w", d.err)
	}
	return e, nil
}

// auditDecoder reads varints and strings until the first error.
type auditDecoder struct {
	b   []byte
	err error
}

func (d *auditDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("truncated")
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *auditDecoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("truncated")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// auditIndex writes e's index keys, whose value is e's category (where the
// entry is); withOutcome adds its outcome's.
func auditIndex(t *tx, e *AuditEntry, suffix []byte, withOutcome bool) error {
	idx := [...]struct {
		dim   byte
		value string
	}{{'s', e.Session}, {'a', e.Agent}, {'o', e.Outcome}}
	n := len(idx)
	if !withOutcome {
		n--
	}
	t.vbuf = append(t.vbuf[:0], e.Category...)
	for _, i := range idx[:n] {
		if i.value == "" {
			continue
		}
		t.kbuf = appendAuditIndexKey(t.kbuf[:0], i.dim, i.value, suffix)
		if err := t.set(t.kbuf, t.vbuf); err != nil {
			return err
		}
	}
	return nil
}

// auditToolResult completes the entry of the call the result is of.
func auditToolResult(t *tx, ev *event) error {
	p, err := payloadOf[schemas.ToolResult](t, Audit, ev)
	if p == nil {
		return err
	}
	ck := auditCallKey(p.CallID)
	e, err := loadAuditEntry(t, ck)
	if err != nil || e == nil {
		return err // a result of a call from before the audit projection
	}
	store[AuditEntry](t, ck, nil)
	if e.Details == nil {
		e.Details = map[string]string{}
	}
	e.Details["exit_code"] = strconv.Itoa(p.ExitCode)
	e.Details["duration_ms"] = strconv.FormatInt(p.DurationMS, 10)
	e.Details["result_seq"] = strconv.FormatUint(ev.seq, 10)
	if p.Signal != "" {
		e.Details["signal"] = p.Signal
	}
	if !p.OK {
		e.Outcome, e.Reason = schemas.OutcomeError, p.Error
		if e.Reason == "" {
			e.Reason = p.Summary
		}
	}
	if err := fileAuditEntry(t, e); err != nil || p.OK {
		return err
	}
	var buf [auditSuffixLen]byte
	t.kbuf = appendAuditIndexKey(t.kbuf[:0], 'o', e.Outcome, appendAuditSuffix(buf[:0], e.At, e.Seq))
	return t.set(t.kbuf, []byte(e.Category))
}

// fileTools are the tools whose calls are file operations; every other
// tool call runs a process.
var fileTools = map[string]string{
	"read_file": "read", "write_file": "write", "edit_file": "edit", "list": "list", "glob": "glob", "grep": "grep",
}

// auditOf fills e with the entry an event makes (without the envelope's
// fields) and reports whether it makes one: most events are none of the
// audit's business.
func auditOf(t *tx, ev *event, e *AuditEntry) (bool, error) {
	env := ev.env
	*e = AuditEntry{Outcome: schemas.OutcomeAllowed}
	switch env.Type {
	case schemas.TypeAuditRecord:
		p, err := payloadOf[schemas.AuditRecord](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason, e.Details = p.Category, p.Action, p.Target, p.Outcome, p.Reason, p.Details
	case schemas.TypePermissionRequest:
		p, err := payloadOf[schemas.PermissionRequest](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason, e.Agent = schemas.AuditPermission, "request", p.Target, schemas.OutcomeAsked, p.Reason, p.Agent
		e.Details = map[string]string{"grant": p.Grant, "call": p.CallID}
	case schemas.TypePermissionDecision:
		p, err := payloadOf[schemas.PermissionDecision](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Reason = schemas.AuditPermission, p.Decision, p.RequestID, p.Reason
		if p.Decision != schemas.DecisionAllow {
			e.Outcome = schemas.OutcomeDenied
		}
		e.Details = map[string]string{"scope": p.Scope}
	case schemas.TypePromptRejected:
		p, err := payloadOf[schemas.PromptRejected](t, Audit, ev)
		if p == nil {
			return false, err
		}
		pats := make([]string, len(p.Findings))
		for i, f := range p.Findings {
			pats[i] = f.Pattern
		}
		e.Category, e.Action, e.Outcome, e.Reason = schemas.AuditPermission, "prompt_rejected", schemas.OutcomeDenied, p.Reason
		e.Details = map[string]string{"findings": strconv.Itoa(len(p.Findings)), "patterns": strings.Join(pats, ",")}
	case schemas.TypeHookDecision:
		p, err := payloadOf[schemas.HookDecision](t, Audit, ev)
		if p == nil || p.Action != "block" {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason, e.Agent = schemas.AuditPermission, "hook_block", p.Tool, schemas.OutcomeDenied, p.Reason, p.Agent
		e.Details = map[string]string{"point": p.Point, "hook": p.By}
	case schemas.TypeDeadLetter:
		p, err := payloadOf[schemas.DeadLetter](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason = schemas.AuditSession, "dead_letter", p.Subject, schemas.OutcomeError, p.Reason
		if strings.Contains(p.Reason, events.ErrForgedSource.Error()) {
			e.Category, e.Outcome = schemas.AuditPermission, schemas.OutcomeDenied
		}
		e.Details = map[string]string{"consumer": p.Consumer, "stream_seq": strconv.FormatUint(p.StreamSeq, 10), "deliveries": strconv.Itoa(p.Deliveries)}
	case schemas.TypeToolCall:
		p, err := payloadOf[schemas.ToolCall](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target = schemas.AuditProcess, p.Tool, schemas.ToolTarget(p.Args)
		if _, ok := fileTools[p.Tool]; ok {
			e.Category = schemas.AuditFile
		}
		e.Details = map[string]string{"call": p.CallID}
		if p.DAGID != "" {
			e.Details["node"] = p.DAGID + "/" + p.NodeID
		}
	case schemas.TypeLLMUsage:
		p, err := payloadOf[schemas.LLMUsage](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Agent = schemas.AuditLLM, "call", p.Model, p.Agent
		e.Details = map[string]string{"call": p.CallID, "tokens": strconv.Itoa(p.Usage.TotalTokens),
			"prompt_tokens": strconv.Itoa(p.Usage.PromptTokens), "completion_tokens": strconv.Itoa(p.Usage.CompletionTokens)}
		if p.CostUSD > 0 {
			e.Details["cost_usd"] = strconv.FormatFloat(p.CostUSD, 'f', -1, 64)
		}
		if p.Provider != "" {
			e.Details["provider"] = p.Provider
		}
	case schemas.TypeLLMResponse:
		// A call that succeeded is the llm_usage after it; a failed one has
		// none.
		p, err := payloadOf[schemas.LLMResponse](t, Audit, ev)
		if p == nil || p.Error == "" {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason = schemas.AuditLLM, "call", p.Model, schemas.OutcomeError, p.Error
		e.Details = map[string]string{"call": p.CallID}
	case schemas.TypeSessionCreate, schemas.TypeSessionComplete, schemas.TypeSessionSuspend, schemas.TypeSessionResume, schemas.TypeSessionFork:
		e.Category, e.Action = schemas.AuditSession, strings.TrimPrefix(string(env.Type), "session_")
		if env.Type == schemas.TypeSessionFork {
			p, err := payloadOf[schemas.SessionFork](t, Audit, ev)
			if p == nil {
				return false, err
			}
			e.Target, e.Reason = p.Parent, p.Reason
			e.Details = map[string]string{"parent_seq": strconv.FormatUint(p.ParentSeq, 10)}
		}
	case schemas.TypeSessionFail:
		p, err := payloadOf[schemas.SessionFail](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Outcome, e.Reason = schemas.AuditSession, "fail", schemas.OutcomeError, p.Reason
	case schemas.TypeSignal:
		p, err := payloadOf[schemas.Signal](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Reason = schemas.AuditSession, p.Action, p.Scope, p.Reason
	case schemas.TypeDAGExecute:
		p, err := payloadOf[schemas.DAGExecute](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target = schemas.AuditSession, "workflow_start", p.DAG.ID
		e.Details = map[string]string{"nodes": strconv.Itoa(len(p.DAG.Nodes))}
	case schemas.TypeWorkflowComplete:
		p, err := payloadOf[schemas.WorkflowComplete](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target = schemas.AuditSession, "workflow_complete", p.DAGID
		if p.Outcome != schemas.OutcomeSucceeded {
			e.Outcome, e.Reason = schemas.OutcomeError, p.Summary
		}
		e.Details = map[string]string{"outcome": p.Outcome, "succeeded": strconv.Itoa(p.Succeeded), "failed": strconv.Itoa(p.Failed), "skipped": strconv.Itoa(p.Skipped)}
	case schemas.TypeTaskFailed:
		p, err := payloadOf[schemas.TaskFailed](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason = schemas.AuditSession, "task_failed", p.DAGID+"/"+p.NodeID, schemas.OutcomeError, p.Error
		e.Details = map[string]string{"attempt": strconv.Itoa(p.Attempt)}
	case schemas.TypePipelineStage:
		p, err := payloadOf[schemas.PipelineStage](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Agent = schemas.AuditSession, "pipeline_stage", p.PipelineID+"/"+p.Stage, p.Agent
		e.Details = map[string]string{"loop": strconv.Itoa(p.Loop)}
	case schemas.TypeAgentRestart:
		p, err := payloadOf[schemas.AgentRestart](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Outcome, e.Reason = schemas.AuditSession, "agent_restart", p.Agent, schemas.OutcomeError, p.Reason
	case schemas.TypeScheduleAdd:
		p, err := payloadOf[schemas.ScheduleAdd](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target = schemas.AuditConfig, "schedule_add", p.Name
	case schemas.TypeSchedulePause, schemas.TypeScheduleResume, schemas.TypeScheduleRemove, schemas.TypeScheduleDisable:
		p, err := payloadOf[schemas.ScheduleControl](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.Category, e.Action, e.Target, e.Reason = schemas.AuditConfig, string(env.Type), p.Name, p.Reason
	default:
		return false, nil
	}
	if !schemas.IsAuditCategory(e.Category) {
		return false, t.reject(Audit, ev, "audit category %q: use one of %s", e.Category, strings.Join(schemas.AuditCategories, ", "))
	}
	return true, nil
}
