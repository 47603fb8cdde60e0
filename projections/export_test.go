package projections

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// SetAuditChunkItems makes audit chunks hold n items until the test ends:
// small chunks seal within the few events a test folds.
func SetAuditChunkItems(t interface{ Cleanup(func()) }, n int) {
	old := auditChunkItems
	auditChunkItems = n
	t.Cleanup(func() { auditChunkItems = old })
}

// AuditList is how an audit list is stored: the item count of each sealed
// chunk and of each segment of its open chunk, how many amendments it has,
// and the sequences of its items in key order.
type AuditList struct {
	Sealed, Segments []int
	Amends           int
	Seqs             []uint64
}

// AuditLists reads how s stores each audit list, by the list's prefix.
func AuditLists(s *Store) (map[string]*AuditList, error) {
	prefix := []byte(Audit + "/")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	lists := map[string]*AuditList{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		n := auditListLen(k)
		kind := auditKeyKind(k, n)
		if kind == 0 {
			continue
		}
		l := lists[string(k[:n])]
		if l == nil {
			l = &AuditList{}
			lists[string(k[:n])] = l
		}
		if kind == auditAmendKey {
			l.Amends++
			continue
		}
		r, err := newAuditChunkReader(it.Value())
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		items := 0
		for {
			seq, _, ok, err := r.next()
			if err != nil {
				return nil, fmt.Errorf("%q: %w", k, err)
			}
			if !ok {
				break
			}
			l.Seqs = append(l.Seqs, seq)
			items++
		}
		if kind == auditSealedKey {
			l.Sealed = append(l.Sealed, items)
		} else {
			l.Segments = append(l.Segments, items)
		}
	}
	return lists, it.Error()
}
