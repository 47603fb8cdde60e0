package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// AsOf is a point in the stream: the last event at or before sequence Seq, or,
// with Time set, the events up to the first one stamped after Time. The zero
// AsOf is the end of the stream.
type AsOf struct {
	Seq  uint64    `json:"seq,omitempty"`
	Time time.Time `json:"time,omitzero"`
}

// VerifyReport is the result of Verify.
type VerifyReport struct {
	// Applied is the sequence the live store was compared at.
	Applied uint64 `json:"applied"`
	// Keys is how many keys were compared.
	Keys int `json:"keys"`
	// Difference is the first key that differs, if any.
	Difference *Difference `json:"difference,omitempty"`
	Seconds    float64     `json:"seconds"`
}

// Difference is a key whose live value differs from the rebuilt one; a missing
// side is "(absent)".
type Difference struct {
	Key     string `json:"key"`
	Live    string `json:"live"`
	Rebuilt string `json:"rebuilt"`
}

func (d *Difference) String() string {
	return fmt.Sprintf("key %s: live %s, rebuilt %s", d.Key, d.Live, d.Rebuilt)
}

// Verify rebuilds every projection in memory from src, each up to the cursor
// the live store has for it, and compares the two key by key. It reads a
// snapshot, so the projector may keep running. A difference is reported in the
// report and as an error wrapping ErrVerify.
func (s *Store) Verify(ctx context.Context, src Source) (*VerifyReport, error) {
	start := time.Now()
	snap, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	if v, err := getFrom(snap, rebuildKey); err != nil || v != nil {
		return nil, errors.Join(err, fmt.Errorf("%w: a rebuild of the projections is under way or was interrupted; verify once it has finished", ErrVerify))
	}
	until, _, err := readCursors(snap)
	if err != nil {
		return nil, err
	}
	var to uint64
	for _, c := range until {
		to = max(to, c)
	}
	mem, err := openMem(ctx, s.log)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	if to > 0 {
		mp := mem.Projector(src)
		mp.until = until
		mp.busy.Lock()
		err := mp.fold(ctx, false, to)
		mp.busy.Unlock()
		if err != nil {
			return nil, fmt.Errorf("rebuild in memory: %w", err)
		}
	}
	report := &VerifyReport{Applied: to}
	for _, c := range until {
		report.Applied = min(report.Applied, c)
	}
	d, n, err := compare(snap, mem.db)
	report.Keys, report.Difference, report.Seconds = n, d, time.Since(start).Seconds()
	if err != nil {
		return report, err
	}
	if d != nil {
		return report, fmt.Errorf("%w: %s", ErrVerify, d)
	}
	return report, nil
}

// compare walks two stores in key order and returns the first difference and
// how many keys it compared.
func compare(live, rebuilt pebble.Reader) (*Difference, int, error) {
	li, err := walkStore(live)
	if err != nil {
		return nil, 0, err
	}
	defer li.close()
	ri, err := walkStore(rebuilt)
	if err != nil {
		return nil, 0, err
	}
	defer ri.close()
	n := 0
	lv, rv := li.first(), ri.first()
	for lv || rv {
		n++
		c := 0
		switch {
		case !lv:
			c = 1
		case !rv:
			c = -1
		default:
			c = bytes.Compare(li.key, ri.key)
		}
		switch {
		case c < 0:
			return &Difference{Key: printable(li.key), Live: printable(li.val), Rebuilt: "(absent)"}, n, nil
		case c > 0:
			return &Difference{Key: printable(ri.key), Live: "(absent)", Rebuilt: printable(ri.val)}, n, nil
		case !bytes.Equal(li.val, ri.val):
			return &Difference{Key: printable(li.key), Live: printable(li.val), Rebuilt: printable(ri.val)}, n, nil
		}
		lv, rv = li.next(), ri.next()
	}
	return nil, n, errorsJoin(li.it.Error(), ri.it.Error())
}

// storeWalk reads a store in key order for compare, an audit list's
// chunks as a fold that never flushed would store them: a category's open
// chunk (its segments) and an index list (its chunks) as one chunk, under
// the list's prefix and auditOpenSuffix, and each sealed chunk of a
// category with its amendments in it. Where flushes cut an open chunk or
// an index list, and which results complete an entry in its chunk or amend
// it, depends on the batches the events were folded in, which a rebuild
// does not share with the live fold.
type storeWalk struct {
	it       *pebble.Iterator
	key, val []byte
	// merged: key and val are a merged chunk's, and it is past its keys.
	merged bool
}

func walkStore(r pebble.Reader) (*storeWalk, error) {
	it, err := r.NewIter(nil)
	if err != nil {
		return nil, err
	}
	return &storeWalk{it: it}, nil
}

func (w *storeWalk) close() { w.it.Close() }

func (w *storeWalk) first() bool { return w.at(w.it.First()) }

func (w *storeWalk) next() bool {
	if w.merged {
		return w.at(w.it.Valid())
	}
	return w.at(w.it.Next())
}

// at reads the key the iterator is at (valid), merged with the keys after
// it that are of the same chunk.
func (w *storeWalk) at(valid bool) bool {
	w.merged = false
	if !valid {
		return false
	}
	w.key, w.val = w.it.Key(), w.it.Value()
	n := auditListLen(w.key)
	kind := auditKeyKind(w.key, n)
	switch {
	case kind == auditSegmentKey || kind == auditSealedKey && w.key[len("audit/")] != 'c':
		prefix := slices.Clone(w.key[:n]) // the iterator's key changes as it moves
		if c := w.segments(prefix, kind); c != nil {
			w.key = append(prefix, auditOpenSuffix...)
			w.val = appendAuditChunk(nil, c.first, c.hw, c, 0, len(c.items))
			w.merged = true
		}
	case kind == auditSealedKey:
		w.key = slices.Clone(w.key)
		w.val = w.amended(n)
		w.merged = true
	}
	return true
}

// segments reads as one chunk the keys of kind of the list at prefix from
// the one the iterator is at: an open chunk's segments, or an index list's
// chunks (nil: the first does not read, and is compared as it is stored).
func (w *storeWalk) segments(prefix []byte, kind byte) *auditChunk {
	c, segs := &auditChunk{}, 0
	for w.it.Valid() && bytes.HasPrefix(w.it.Key(), prefix) && auditKeyKind(w.it.Key(), len(prefix)) == kind {
		if err := c.addSegment(w.it.Value()); err != nil {
			break // compared as it is stored: it differs from a rebuild's
		}
		segs++
		w.it.Next()
	}
	if segs == 0 {
		return nil
	}
	return c
}

// amended returns the sealed chunk at w.key (the iterator's) with the
// amendments after it, leaving the iterator past them. Amendments that do
// not apply are compared as they are stored.
func (w *storeWalk) amended(n int) []byte {
	base := slices.Clone(w.val)
	var amends map[uint64][]byte
	for w.it.Next() && bytes.HasPrefix(w.it.Key(), w.key) && auditKeyKind(w.it.Key(), n) == auditAmendKey {
		if amends == nil {
			amends = map[uint64][]byte{}
		}
		amends[binary.BigEndian.Uint64(w.it.Key()[n+9:])] = slices.Clone(w.it.Value())
	}
	if amends == nil {
		return base
	}
	c, err := decodeAuditChunk(base)
	if err == nil {
		err = c.amend(amends)
	}
	if err != nil {
		w.it.SeekGE(w.key)
		w.it.Next()
		return base
	}
	return appendAuditChunk(nil, c.first, c.hw, c, 0, len(c.items))
}

// printable quotes b, cut to 160 bytes.
func printable(b []byte) string {
	const max = 160
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return strconv.Quote(string(b))
}

// asOfProjections are the projections a session view needs.
var asOfProjections = []string{Sessions, DAGs, Checkpoints, Pending, Log}

// SessionAsOf folds one session's events up to a point into memory and returns
// the session, its DAGs, checkpoints and open requests as they were then. It
// reads the session log (which also holds the switches that suspended the
// session, and for a fork its lineage) and the global signals, so it costs
// O(the session's events), not O(the stream). Session is nil if the session
// did not exist yet.
func (s *Store) SessionAsOf(ctx context.Context, session string, until AsOf) (*SessionView, error) {
	mem, asOf, segs, err := s.foldAsOf(ctx, session, until)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	view := &SessionView{AsOf: asOf, DAGs: []*DAG{}, Checkpoints: []*Checkpoint{}, Pending: []*PendingRequest{}}
	// A fork as of a point before it began is the ancestor whose history
	// it shares there.
	for i := len(segs) - 1; i >= 0 && view.Session == nil; i-- {
		if view.Session, err = mem.Session(ctx, segs[i].session); err != nil && !isNotFound(err) {
			return nil, err
		}
		if view.Session != nil {
			session = segs[i].session
		}
	}
	if view.DAGs, err = mem.DAGs(ctx, DAGFilter{Session: session}); err != nil {
		return nil, err
	}
	if view.DAGs == nil {
		view.DAGs = []*DAG{}
	}
	if view.Checkpoints, err = mem.Checkpoints(ctx, session, ""); err != nil {
		return nil, err
	}
	if view.Pending, err = mem.Pending(ctx, session); err != nil {
		return nil, err
	}
	return view, nil
}

// foldAsOf folds a session's history (its lineage's events and the global
// signals) up to a point into an in-memory store, which the caller closes,
// and returns it with the last sequence folded and the session's lineage.
func (s *Store) foldAsOf(ctx context.Context, session string, until AsOf) (*Store, uint64, []logSegment, error) {
	snap, err := s.snapshot()
	if err != nil {
		return nil, 0, nil, err
	}
	defer snap.Close()
	segs, err := lineage(snap, session)
	if err != nil {
		return nil, 0, nil, err
	}
	var entries []LogEntry
	collect := func(lo, hi []byte) error {
		return scanRange(snap, lo, hi, func(k, v []byte) error {
			entries = append(entries, LogEntry{Seq: seqSuffix(k), Data: append([]byte(nil), v...)})
			return nil
		})
	}
	for _, sg := range clip(segs, 0, until.Seq) {
		if err := collect(logKey(sg.session, sg.from), logUpper(sg)); err != nil {
			return nil, 0, nil, err
		}
	}
	if len(entries) == 0 {
		return nil, 0, nil, notFound("session", session)
	}
	if err := collect(globalLogPrefix, prefixEnd(globalLogPrefix)); err != nil {
		return nil, 0, nil, err
	}
	sortEntries(entries)
	evs := make([]*events.Event, 0, len(entries))
	foreign := map[uint64]bool{}
	for _, e := range entries {
		if until.Seq != 0 && e.Seq > until.Seq {
			break
		}
		env, err := logEnvelope(e.Data)
		if env != nil && !until.Time.IsZero() && env.Timestamp.After(until.Time) {
			break
		}
		if env != nil && !isLineageOf(segs, env.SessionID) && env.Type == schemas.TypeSessionSwitch {
			// Another session's switch away from this one: it suspends this
			// session only if the live fold accepted it, which only that fold
			// can know; a refused one is still in the log.
			rej, err := getFrom(snap, rejectionKey(Sessions, e.Seq))
			if err != nil {
				return nil, 0, nil, err
			}
			foreign[e.Seq] = rej == nil
		}
		evs = append(evs, &events.Event{Seq: e.Seq, Data: e.Data, Env: env, Err: err})
	}
	for i, ev := range evs {
		ev.Pending = uint64(len(evs) - i - 1)
	}
	mem, err := openMem(ctx, s.log)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(evs) == 0 {
		return mem, 0, segs, nil
	}
	mp := mem.Projector(nil)
	mp.foreign = foreign
	mp.until = map[string]uint64{}
	for _, name := range asOfProjections {
		mp.until[name] = evs[len(evs)-1].Seq
	}
	ch := make(chan *event, len(evs))
	for _, ev := range evs {
		ch <- newEvent(ev)
	}
	close(ch)
	if err := mp.applyLoop(ctx, ch, false, nil); err != nil {
		mem.Close()
		return nil, 0, nil, err
	}
	return mem, evs[len(evs)-1].Seq, segs, nil
}

func sortEntries(e []LogEntry) {
	slices.SortFunc(e, func(a, b LogEntry) int { return cmpU64(a.Seq, b.Seq) })
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
