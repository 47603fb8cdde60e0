package projections

import (
	"encoding/json"

	"github.com/sylk/sylk/schemas"
)

// applyHistory files each history_entry the Archivalist appends under its
// time (history/e/, the entry itself) and indexes it by session (history/s/)
// and by category (history/c/), so a query reads the index its filter names
// and no other entries. An entry needs a category that is a name (it is part
// of a key) and a summary; otherwise it is refused.
func applyHistory(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.Type != schemas.TypeHistoryEntry {
		return nil
	}
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
	return t.set(historySuffix(historyCategoryPrefix(p.Category), env.Timestamp, ev.seq), nil)
}
