package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// Validate reports the first contradiction or unusable value in q, wrapping
// ErrInvalidQuery.
func (q *HistoryQuery) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: history: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
	}
	switch {
	case q.CurrentOnly && q.CrossSession:
		return bad("current_only and cross_session contradict each other")
	case q.CurrentOnly && len(q.Sessions) > 0:
		return bad("current_only and session_ids contradict each other")
	case q.CurrentOnly && q.Session == "":
		return bad("current_only needs the current session")
	case q.CrossSession && len(q.Sessions) > 0:
		return bad("cross_session (every session) and session_ids (only these) contradict each other")
	case q.Limit < 0:
		return bad("limit %d is negative", q.Limit)
	case !q.Since.IsZero() && !q.Until.IsZero() && q.Since.After(q.Until):
		return bad("since %s is after until %s", q.Since.Format(time.RFC3339Nano), q.Until.Format(time.RFC3339Nano))
	}
	ids := append(append([]string{q.Session}, q.Sessions...), q.ExcludeSessions...)
	for _, id := range ids {
		if id != "" && !schemas.ValidName(id) {
			return bad("session %q is not a session id", id)
		}
	}
	for _, c := range q.Categories {
		if !schemas.ValidName(c) {
			return bad("category %q is not a name", c)
		}
	}
	return nil
}

// sessions is the sessions q reads; nil means every session.
func (q *HistoryQuery) sessions() []string {
	switch {
	case len(q.Sessions) > 0:
		return q.Sessions
	case q.Session != "" && !q.CrossSession:
		return []string{q.Session}
	}
	return nil
}

// match reports whether e passes the filters that no index answered.
func (q *HistoryQuery) match(e *HistoryEntry, search string) bool {
	if slices.Contains(q.ExcludeSessions, e.Session) {
		return false
	}
	if len(q.Categories) > 0 && !slices.Contains(q.Categories, e.Category) {
		return false
	}
	if s := q.sessions(); s != nil && !slices.Contains(s, e.Session) {
		return false
	}
	if search == "" {
		return true
	}
	if containsFold(e.Summary, search) || containsFold(e.Detail, search) {
		return true
	}
	return slices.ContainsFunc(e.Tags, func(t string) bool { return containsFold(t, search) })
}

// containsFold reports whether lower (already lower case) is in s, ignoring
// case.
func containsFold(s, lower string) bool { return strings.Contains(strings.ToLower(s), lower) }

// History lists the history entries q selects, newest first. It reads the
// session index when q names sessions, else the category index when it names
// categories, else every entry, each from the newest back within Since and
// Until, and stops at Limit matches.
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]*HistoryEntry, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultHistoryLimit
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	var prefixes [][]byte
	switch ss := q.sessions(); {
	case ss != nil:
		for _, sid := range dedup(ss) {
			prefixes = append(prefixes, historySessionPrefix(sid))
		}
	case len(q.Categories) > 0:
		for _, c := range dedup(q.Categories) {
			prefixes = append(prefixes, historyCategoryPrefix(c))
		}
	default:
		prefixes = [][]byte{historyEntryPrefix}
	}
	search := strings.ToLower(q.Search)
	out := []*HistoryEntry{}
	for _, p := range prefixes {
		n := 0
		err := scanHistory(snap, p, &q, func(k, v []byte) (bool, error) {
			if !bytes.HasPrefix(k, historyEntryPrefix) {
				var err error
				if v, err = getFrom(snap, historyEntryKeyOf(k)); err != nil || v == nil {
					return err == nil, err
				}
			}
			e := &HistoryEntry{}
			if err := json.Unmarshal(v, e); err != nil {
				return false, fmt.Errorf("decode history entry at %q: %w", k, err)
			}
			if q.match(e, search) {
				out = append(out, e)
				n++
			}
			return n < limit, nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b *HistoryEntry) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmpU64(b.Seq, a.Seq)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// scanHistory calls fn with the keys under prefix whose time is within q's
// Since and Until, newest first, until fn returns false.
func scanHistory(r pebble.Reader, prefix []byte, q *HistoryQuery, fn func(k, v []byte) (bool, error)) error {
	lo, hi := prefix, prefixEnd(prefix)
	if !q.Since.IsZero() {
		lo = appendTime(bytes.Clone(prefix), q.Since)
	}
	if !q.Until.IsZero() {
		hi = prefixEnd(appendTime(bytes.Clone(prefix), q.Until))
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for valid := it.Last(); valid; valid = it.Prev() {
		more, err := fn(it.Key(), it.Value())
		if err != nil || !more {
			return errorsJoin(err, it.Close())
		}
	}
	return errorsJoin(it.Error(), it.Close())
}

func dedup(l []string) []string {
	out := slices.Clone(l)
	slices.Sort(out)
	return slices.Compact(out)
}
