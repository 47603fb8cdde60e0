package projections

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/sylk/sylk/schemas"
)

// applyHistory files each history_entry the Archivalist appends under its
// time (history/e/, the entry itself) and indexes it by session (history/s/),
// by category (history/c/), by id (history/id/) and by its words (history/t/,
// for ranked search); a failure with an approach and an error pattern counts
// in the failure memory (history/f/). A history_promote marks an entry
// promoted (history/p/). An entry needs a category that is a name (it is
// part of a key) and a summary; otherwise it is refused.
func applyHistory(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	switch env.Type {
	case schemas.TypeHistoryEntry:
		return applyHistoryEntry(t, ev)
	case schemas.TypeHistoryPromote:
		return applyHistoryPromote(t, ev)
	}
	return nil
}

// historyRef is where an entry is filed: its time and sequence.
type historyRef struct {
	At  time.Time `json:"at"`
	Seq uint64    `json:"seq"`
}

// historyStats are the totals BM25 needs.
type historyStats struct {
	Entries int   `json:"entries"`
	Length  int64 `json:"length"`
}

func applyHistoryEntry(t *tx, ev *event) error {
	env := ev.env
	p, err := payloadOf[schemas.HistoryEntry](t, History, ev)
	if p == nil {
		return err
	}
	switch {
	case !schemas.ValidName(p.Category):
		return t.reject(History, ev, "category %q is not a name ([A-Za-z0-9_-], at most 64)", p.Category)
	case p.Summary == "":
		return t.reject(History, ev, "a %s entry without a summary", p.Category)
	}
	e := HistoryEntry{
		Seq: ev.seq, ID: env.ID, Session: env.SessionID, At: env.Timestamp, Source: env.Source,
		Cause: env.ParentID, Correlation: env.CorrelationID,
		Category: p.Category, Summary: p.Summary, Detail: p.Detail, DAG: p.DAGID, Node: p.NodeID, Tags: p.Tags,
		Approach: p.Approach, ErrorPattern: p.ErrorPattern,
	}
	v, err := json.Marshal(&e)
	if err != nil {
		return err
	}
	if err := t.set(historyKey(env.Timestamp, ev.seq), v); err != nil {
		return err
	}
	if err := t.set(historySuffix(historySessionPrefix(env.SessionID), env.Timestamp, ev.seq), nil); err != nil {
		return err
	}
	if err := t.set(historySuffix(historyCategoryPrefix(p.Category), env.Timestamp, ev.seq), nil); err != nil {
		return err
	}
	store(t, historyIDKey(env.ID), &historyRef{At: env.Timestamp, Seq: ev.seq})
	if err := indexHistoryTerms(t, &e); err != nil {
		return err
	}
	if p.ErrorPattern != "" {
		return rememberFailure(t, &e)
	}
	return nil
}

// indexHistoryTerms writes the postings of an entry's words.
func indexHistoryTerms(t *tx, e *HistoryEntry) error {
	counts := map[string]int{}
	add := func(w string) { counts[w]++ }
	Terms(e.Summary, add)
	Terms(e.Detail, add)
	for _, tag := range e.Tags {
		Terms(tag, add)
	}
	length := 0
	for _, n := range counts {
		length += n
	}
	var v []byte
	for term, n := range counts {
		if !validTerm(term) {
			continue
		}
		v = binary.AppendUvarint(v[:0], uint64(n))
		v = binary.AppendUvarint(v, uint64(length))
		if err := t.set(historySuffix(historyTermPrefix(term), e.At, e.Seq), v); err != nil {
			return err
		}
	}
	st, err := load[historyStats](t, historyStatsKey)
	if err != nil {
		return err
	}
	if st == nil {
		st = &historyStats{}
	}
	st.Entries++
	st.Length += int64(length)
	store(t, historyStatsKey, st)
	return nil
}

// FailureSignature names the failure memory of an approach and an error
// pattern.
func FailureSignature(approach, pattern string) string {
	h := sha256.Sum256([]byte(approach + "\x00" + pattern))
	return hex.EncodeToString(h[:8])
}

// rememberFailure counts a failure in its memory.
func rememberFailure(t *tx, e *HistoryEntry) error {
	sig := FailureSignature(e.Approach, e.ErrorPattern)
	k := historyFailureKey(sig)
	m, err := load[FailureMemory](t, k)
	if err != nil {
		return err
	}
	if m == nil {
		m = &FailureMemory{Signature: sig, Approach: e.Approach, ErrorPattern: e.ErrorPattern, First: e.At}
	}
	m.Count++
	if !slices.Contains(m.Sessions, e.Session) {
		m.Sessions = append(m.Sessions, e.Session)
	}
	m.Last, m.LastSeq, m.LastSummary = e.At, e.Seq, e.Summary
	store(t, k, m)
	return nil
}

func applyHistoryPromote(t *tx, ev *event) error {
	p, err := payloadOf[schemas.HistoryPromote](t, History, ev)
	if p == nil {
		return err
	}
	ref, err := load[historyRef](t, historyIDKey(p.EntryID))
	if err != nil {
		return err
	}
	switch {
	case ref == nil:
		return t.reject(History, ev, "no history entry has id %q", p.EntryID)
	case ref.Seq != p.Seq:
		return t.reject(History, ev, "history entry %q is at seq %d, not %d", p.EntryID, ref.Seq, p.Seq)
	}
	return t.set(historySuffix(append([]byte(nil), historyPromotedPrefix...), ref.At, ref.Seq), []byte(strings.TrimSpace(p.Reason)))
}
