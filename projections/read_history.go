package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
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

// sessions is the sessions q reads; nil means every session. promoted
// says the entries promoted to project scope are read too.
func (q *HistoryQuery) sessions() (ids []string, promoted bool) {
	switch {
	case len(q.Sessions) > 0:
		return q.Sessions, false
	case q.Session != "" && q.CurrentOnly:
		return []string{q.Session}, false
	case q.Session != "" && !q.CrossSession:
		return []string{q.Session}, true
	}
	return nil, false
}

// match reports whether e passes the filters that no index answered.
func (q *HistoryQuery) match(e *HistoryEntry) bool {
	if slices.Contains(q.ExcludeSessions, e.Session) {
		return false
	}
	if len(q.Categories) > 0 && !slices.Contains(q.Categories, e.Category) {
		return false
	}
	if !q.Since.IsZero() && e.At.Before(q.Since) || !q.Until.IsZero() && e.At.After(q.Until) {
		return false
	}
	ss, promoted := q.sessions()
	return ss == nil || slices.Contains(ss, e.Session) || promoted && e.Promoted
}

// History lists the history entries q selects: ranked by relevance when q
// searches, else newest first. Without a search it reads the session index
// (and the promoted one) when q names sessions, else the category index when
// it names categories, else every entry, each from the newest back within
// Since and Until, and stops at Limit matches.
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
	if q.ID != "" {
		return historyByID(snap, &q)
	}
	if q.Search != "" {
		return searchHistory(snap, &q, limit)
	}
	var prefixes [][]byte
	switch ss, promoted := q.sessions(); {
	case ss != nil:
		for _, sid := range dedup(ss) {
			prefixes = append(prefixes, historySessionPrefix(sid))
		}
		if promoted {
			prefixes = append(prefixes, historyPromotedPrefix)
		}
	case len(q.Categories) > 0:
		for _, c := range dedup(q.Categories) {
			prefixes = append(prefixes, historyCategoryPrefix(c))
		}
	default:
		prefixes = [][]byte{historyEntryPrefix}
	}
	out := []*HistoryEntry{}
	seen := map[uint64]bool{}
	for _, p := range prefixes {
		n := 0
		err := scanHistory(snap, p, &q, func(k, v []byte) (bool, error) {
			suffix := k[len(k)-historySuffixLen:]
			if seen[binary.BigEndian.Uint64(suffix[12:])] {
				return true, nil
			}
			e, err := historyEntryAt(snap, suffix, v, bytes.HasPrefix(k, historyEntryPrefix))
			if err != nil || e == nil {
				return err == nil, err
			}
			if q.match(e) {
				seen[e.Seq] = true
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

// historyEntryAt decodes the entry filed under suffix (its time and seq): v
// when it is the entry's own value, else read. It marks it promoted.
func historyEntryAt(r pebble.Reader, suffix, v []byte, own bool) (*HistoryEntry, error) {
	if !own {
		var err error
		if v, err = getFrom(r, append(append([]byte(nil), historyEntryPrefix...), suffix...)); err != nil || v == nil {
			return nil, err
		}
	}
	e := &HistoryEntry{}
	if err := json.Unmarshal(v, e); err != nil {
		return nil, fmt.Errorf("decode history entry at %x: %w", suffix, err)
	}
	p, err := getFrom(r, append(append([]byte(nil), historyPromotedPrefix...), suffix...))
	e.Promoted = p != nil
	return e, err
}

// historyByID is the entry with q.ID, if q's filters keep it.
func historyByID(r pebble.Reader, q *HistoryQuery) ([]*HistoryEntry, error) {
	v, err := getFrom(r, historyIDKey(q.ID))
	if err != nil || v == nil {
		return []*HistoryEntry{}, err
	}
	var ref historyRef
	if err := json.Unmarshal(v, &ref); err != nil {
		return nil, err
	}
	e, err := historyEntryAt(r, historySuffix(nil, ref.At, ref.Seq), nil, false)
	if err != nil || e == nil || !q.match(e) {
		return []*HistoryEntry{}, err
	}
	return []*HistoryEntry{e}, nil
}

// searchHistory ranks the entries holding every word of q.Search by BM25.
func searchHistory(r pebble.Reader, q *HistoryQuery, limit int) ([]*HistoryEntry, error) {
	var terms []string
	Terms(q.Search, func(t string) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	})
	if len(terms) == 0 {
		return nil, fmt.Errorf("%w: history: search %q has no word (letters or digits, at least %d)", ErrInvalidQuery, q.Search, minTermLen)
	}
	var st historyStats
	if v, err := getFrom(r, historyStatsKey); err != nil {
		return nil, err
	} else if v != nil {
		if err := json.Unmarshal(v, &st); err != nil {
			return nil, err
		}
	}
	avgdl := float64(st.Length) / float64(max(st.Entries, 1))
	scores := map[string]float64{}
	for i, term := range terms {
		type posting struct {
			suffix string
			tf, dl int
		}
		var ps []posting
		prefix := historyTermPrefix(term)
		err := scanPrefix(r, prefix, func(k, v []byte) error {
			suffix := string(k[len(prefix):])
			if _, ok := scores[suffix]; ok || i == 0 {
				tf, n := binary.Uvarint(v)
				dl, _ := binary.Uvarint(v[n:])
				ps = append(ps, posting{suffix, int(tf), int(dl)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		// df counts every posting of the term, but only the entries that
		// hold the earlier terms stay candidates.
		df := 0
		if err := scanPrefix(r, prefix, func(_, _ []byte) error { df++; return nil }); err != nil {
			return nil, err
		}
		next := make(map[string]float64, len(ps))
		for _, p := range ps {
			next[p.suffix] = scores[p.suffix] + bm25(p.tf, p.dl, df, st.Entries, avgdl)
		}
		scores = next
	}
	out := []*HistoryEntry{}
	for suffix, score := range scores {
		e, err := historyEntryAt(r, []byte(suffix), nil, false)
		if err != nil {
			return nil, err
		}
		if e != nil && q.match(e) {
			e.Score = score
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *HistoryEntry) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return cmpU64(b.Seq, a.Seq)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Failures lists the failure memories q selects, the most frequent first.
func (s *Store) Failures(ctx context.Context, q FailureQuery) ([]*FailureMemory, error) {
	if q.Limit < 0 || q.MinCount < 0 {
		return nil, fmt.Errorf("%w: failures: limit %d and min_count %d must not be negative", ErrInvalidQuery, q.Limit, q.MinCount)
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
	prefix := historyFailuresPrefix
	if q.Signature != "" {
		prefix = historyFailureKey(q.Signature)
	}
	var words []string
	Terms(q.Search, func(t string) { words = append(words, t) })
	out := []*FailureMemory{}
	err = scanPrefix(snap, prefix, func(k, v []byte) error {
		m := &FailureMemory{}
		if err := json.Unmarshal(v, m); err != nil {
			return fmt.Errorf("decode failure memory %q: %w", k, err)
		}
		if m.Count < q.MinCount || q.Signature != "" && m.Signature != q.Signature {
			return nil
		}
		if len(words) > 0 {
			have := map[string]bool{}
			Terms(m.Approach+" "+m.ErrorPattern+" "+m.LastSummary, func(t string) { have[t] = true })
			for _, w := range words {
				if !have[w] {
					return nil
				}
			}
		}
		m.Level = FailureLevel(m.Count)
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *FailureMemory) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return b.Last.Compare(a.Last)
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
