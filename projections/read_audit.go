package projections

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// DefaultAuditLimit is how many entries an audit query returns when it sets
// no limit.
const DefaultAuditLimit = 1000

// AuditQuery selects audit entries: each set field must match; Since and
// Until bound the entries' time (Until excluded). Limit keeps the newest
// (DefaultAuditLimit when 0).
type AuditQuery struct {
	Category string    `json:"category,omitempty"`
	Session  string    `json:"session,omitempty"`
	Agent    string    `json:"agent,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Until    time.Time `json:"until,omitzero"`
	Limit    int       `json:"limit,omitempty"`
}

// Validate reports the first unusable value in q, wrapping ErrInvalidQuery.
func (q *AuditQuery) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: audit: %s", ErrInvalidQuery, fmt.Sprintf(format, args...))
	}
	switch {
	case q.Category != "" && !schemas.IsAuditCategory(q.Category):
		return bad("category %q: use one of %s", q.Category, strings.Join(schemas.AuditCategories, ", "))
	case q.Outcome != "" && !slices.Contains(schemas.AuditOutcomes, q.Outcome):
		return bad("outcome %q: use one of %s", q.Outcome, strings.Join(schemas.AuditOutcomes, ", "))
	case q.Session != "" && !schemas.ValidName(q.Session):
		return bad("session %q is not a session id", q.Session)
	case q.Agent != "" && !schemas.ValidName(q.Agent):
		return bad("agent %q is not an agent name", q.Agent)
	case q.Limit < 0:
		return bad("limit %d is negative", q.Limit)
	case !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until):
		return bad("since %s is not before until %s", q.Since.Format(time.RFC3339Nano), q.Until.Format(time.RFC3339Nano))
	}
	return nil
}

func (q *AuditQuery) match(e *AuditEntry) bool {
	return (q.Category == "" || e.Category == q.Category) && (q.Session == "" || e.Session == q.Session) &&
		(q.Agent == "" || e.Agent == q.Agent) && (q.Outcome == "" || e.Outcome == q.Outcome) && q.during(e.At)
}

// during reports whether at is within Since and Until.
func (q *AuditQuery) during(at time.Time) bool {
	return (q.Since.IsZero() || !at.Before(q.Since)) && (q.Until.IsZero() || at.Before(q.Until))
}

// lists are the lists that hold every entry q can match, the narrowest of
// its filters': a session's, an agent's or a rare outcome's postings (index
// true), else a category's entries, else every category's.
func (q *AuditQuery) lists() (prefixes [][]byte, index bool) {
	switch {
	case q.Session != "":
		return [][]byte{auditListPrefix('s', q.Session)}, true
	case q.Agent != "":
		return [][]byte{auditListPrefix('a', q.Agent)}, true
	case q.Outcome != "" && q.Outcome != schemas.OutcomeAllowed:
		return [][]byte{auditListPrefix('o', q.Outcome)}, true
	case q.Category != "":
		return [][]byte{auditListPrefix('c', q.Category)}, false
	}
	for _, c := range schemas.AuditCategories {
		prefixes = append(prefixes, auditListPrefix('c', c))
	}
	return prefixes, false
}

// Audit lists the audit entries q selects in stream order: the newest
// (last stored) Limit of them. It reads its lists chunk by chunk from the
// newest back, always the list whose unread items may be the newest, and
// stops once Limit entries are newer than anything left unread, or at a
// chunk older than Since.
func (s *Store) Audit(ctx context.Context, q AuditQuery) ([]*AuditEntry, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultAuditLimit
	}
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	prefixes, index := q.lists()
	r := &auditReader{q: &q, snap: snap, index: index, out: []*AuditEntry{}}
	defer r.close()
	for _, prefix := range prefixes {
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return nil, err
		}
		r.lists = append(r.lists, &auditList{it: it, prefix: prefix, bound: math.MaxUint64})
		it.Last()
	}
	for {
		var l *auditList // the list whose unread items may be the newest
		for _, x := range r.lists {
			if !x.done && (l == nil || x.bound > l.bound) {
				l = x
			}
		}
		if l == nil {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := r.read(l); err != nil {
			return nil, err
		}
		if len(r.out) >= limit && r.final() >= limit {
			break
		}
	}
	out := r.out
	slices.SortFunc(out, func(a, b *AuditEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out[max(0, len(out)-limit):], nil
}

// auditList is one list an audit query reads, from its newest chunk back.
type auditList struct {
	it     *pebble.Iterator
	prefix []byte
	// bound: every item not read yet is of an entry before it (the position
	// of the last chunk read).
	bound uint64
	done  bool
}

// auditReader collects the entries a query matches from its lists.
type auditReader struct {
	q     *AuditQuery
	snap  *pebble.Snapshot
	index bool // the lists hold postings
	lists []*auditList
	out   []*AuditEntry
	// entries reads the entries postings name, a category's chunks at a time.
	entries map[string]*auditEntries
}

// auditEntries reads one category's entries for postings: the chunk (or
// segment) read last is kept, as the postings of a session or agent are
// often of entries near each other.
type auditEntries struct {
	it    *pebble.Iterator
	chunk *auditChunk // nil: none yet
}

func (r *auditReader) close() {
	for _, l := range r.lists {
		l.it.Close()
	}
	for _, c := range r.entries {
		c.it.Close()
	}
}

// final counts the entries found that are newer than every unread item.
func (r *auditReader) final() int {
	var bound uint64
	for _, l := range r.lists {
		if !l.done {
			bound = max(bound, l.bound)
		}
	}
	n := 0
	for _, e := range r.out {
		if e.Seq >= bound {
			n++
		}
	}
	return n
}

// read reads l's next chunk (or segment) back, with its amendments.
func (r *auditReader) read(l *auditList) error {
	if !l.it.Valid() {
		l.done = true
		return l.it.Error()
	}
	amends, err := readAuditAmends(l.it, len(l.prefix))
	if err != nil {
		return fmt.Errorf("audit list %q: %w", l.prefix, err)
	}
	k := l.it.Key()
	c, err := newAuditChunkReader(l.it.Value())
	if err != nil {
		return fmt.Errorf("audit chunk %q: %w", k, err)
	}
	if !r.q.Since.IsZero() && c.hw < r.q.Since.UnixNano() {
		l.done = true // no entry of this chunk or any before is as recent
		return nil
	}
	for {
		seq, b, ok, err := c.next()
		if err != nil {
			return fmt.Errorf("audit chunk %q: %w", k, err)
		}
		if !ok {
			break
		}
		var e *AuditEntry
		if r.index {
			at, category, err := decodeAuditPosting(b)
			if err != nil {
				return fmt.Errorf("audit chunk %q: %w", k, err)
			}
			if !r.q.during(at) || r.q.Category != "" && category != r.q.Category {
				continue
			}
			if e, err = r.entry(category, seq); err != nil {
				return err
			}
		} else {
			if a, ok := amends[seq]; ok {
				b = a
			}
			if e, err = decodeAuditEntry(b); err != nil {
				return fmt.Errorf("audit chunk %q: %w", k, err)
			}
		}
		if r.q.match(e) {
			r.out = append(r.out, e)
		}
	}
	l.bound = c.first
	l.it.Prev()
	return nil
}

// entry reads the entry of seq in category, which a posting names.
func (r *auditReader) entry(category string, seq uint64) (*AuditEntry, error) {
	if r.entries == nil {
		r.entries = map[string]*auditEntries{}
	}
	prefix := auditListPrefix('c', category)
	es := r.entries[category]
	if es == nil {
		it, err := r.snap.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			return nil, err
		}
		es = &auditEntries{it: it}
		r.entries[category] = es
	}
	c := es.chunk
	i, ok := c.find(seq)
	if !ok {
		// The last key before the next position is the segment that holds
		// seq, or the chunk or the last amendment of the chunk.
		if !es.it.SeekLT(binary.BigEndian.AppendUint64(prefix, seq+1)) {
			return nil, fmt.Errorf("audit: a posting names seq %d, before every %s entry", seq, category)
		}
		amends, err := readAuditAmends(es.it, len(prefix))
		if err == nil {
			c, err = decodeAuditChunk(slices.Clone(es.it.Value()))
		}
		if err == nil {
			err = c.amend(amends)
		}
		if err != nil {
			return nil, fmt.Errorf("audit: the %s entry of seq %d: %w", category, seq, err)
		}
		es.chunk = c
		i, ok = c.find(seq)
	}
	if !ok {
		return nil, fmt.Errorf("audit: a posting names seq %d, not a %s entry", seq, category)
	}
	return decodeAuditEntry(c.bytes(i))
}
