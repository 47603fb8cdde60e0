package projections

import (
	"bytes"
	"context"
	"fmt"
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
		(q.Agent == "" || e.Agent == q.Agent) && (q.Outcome == "" || e.Outcome == q.Outcome)
}

// ranges are the key ranges that hold every entry q can match, the
// narrowest of its filters': a session's, an agent's or a rare outcome's
// index (index true: the values name the entries' categories), else a
// category's entries, else every category's.
func (q *AuditQuery) ranges() (prefixes [][]byte, index bool) {
	switch {
	case q.Session != "":
		return [][]byte{auditIndexPrefix('s', q.Session)}, true
	case q.Agent != "":
		return [][]byte{auditIndexPrefix('a', q.Agent)}, true
	case q.Outcome != "" && q.Outcome != schemas.OutcomeAllowed:
		return [][]byte{auditIndexPrefix('o', q.Outcome)}, true
	case q.Category != "":
		return [][]byte{auditIndexPrefix('c', q.Category)}, false
	}
	for _, c := range schemas.AuditCategories {
		prefixes = append(prefixes, auditIndexPrefix('c', c))
	}
	return prefixes, false
}

// Audit lists the audit entries q selects, oldest first: the newest Limit
// of them. It reads its ranges (one, or every category's, merged by time)
// from the newest entry back, and stops at the limit.
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
	prefixes, index := q.ranges()
	its := make([]*pebble.Iterator, 0, len(prefixes))
	defer func() {
		for _, it := range its {
			it.Close()
		}
	}()
	for _, prefix := range prefixes {
		lo, hi := prefix, prefixEnd(prefix)
		if !q.Since.IsZero() {
			lo = appendTime(append([]byte(nil), prefix...), q.Since)
		}
		if !q.Until.IsZero() {
			hi = appendTime(append([]byte(nil), prefix...), q.Until)
		}
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return nil, err
		}
		its = append(its, it)
		it.Last()
	}
	suffix := func(k []byte) []byte { return k[len(k)-auditSuffixLen:] }
	out := []*AuditEntry{}
	for len(out) < limit {
		var it *pebble.Iterator // the range whose next entry is the newest
		for _, x := range its {
			if x.Valid() && (it == nil || bytes.Compare(suffix(x.Key()), suffix(it.Key())) > 0) {
				it = x
			}
		}
		if it == nil {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k, v := it.Key(), it.Value()
		if index {
			if v, err = getFrom(snap, auditEntryKey(string(v), suffix(k))); err != nil {
				return nil, err
			}
			if v == nil {
				return nil, fmt.Errorf("audit index key %q names no entry", k)
			}
		}
		e, err := decodeAuditEntry(v)
		if err != nil {
			return nil, fmt.Errorf("decode audit entry at %q: %w", k, err)
		}
		if q.match(e) {
			out = append(out, e)
		}
		it.Prev()
	}
	for _, it := range its {
		if err := it.Error(); err != nil {
			return nil, err
		}
	}
	slices.Reverse(out)
	return out, nil
}
