package projections

import (
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

// index is the key range that holds every entry q can match, the narrowest
// of its filters': a session's, an agent's, a rare outcome's, a category's,
// else every entry; each bounded by Since and Until.
func (q *AuditQuery) index() (prefix []byte, own bool) {
	switch {
	case q.Session != "":
		return auditIndexPrefix('s', q.Session), false
	case q.Agent != "":
		return auditIndexPrefix('a', q.Agent), false
	case q.Outcome != "" && q.Outcome != schemas.OutcomeAllowed:
		return auditIndexPrefix('o', q.Outcome), false
	case q.Category != "":
		return auditIndexPrefix('c', q.Category), false
	}
	return auditEntryPrefix, true
}

// Audit lists the audit entries q selects, oldest first: the newest Limit
// of them. It reads one index range, from the newest entry back, and stops
// at the limit.
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
	prefix, own := q.index()
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
	defer it.Close()
	out := []*AuditEntry{}
	for it.Last(); it.Valid() && len(out) < limit; it.Prev() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		k, v := it.Key(), it.Value()
		if !own {
			if v, err = getFrom(snap, auditEntryKey(k[len(k)-auditSuffixLen:])); err != nil {
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
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}
