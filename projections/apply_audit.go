package projections

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
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

// The audit is stored in chunks, not a key per entry: a list (a category's
// entries, or the postings of one session, agent or outcome) is a run of
// chunks of up to auditChunkItems items, each under the list's prefix and the
// position of its first item (audit/<dim>/<value>\0<position>). Three or
// four keys an entry (the entry and its index postings) were a quarter of a
// rebuild's keys and cost it 12-19% of its speed; chunked, a rebuild writes
// one key for a few dozen entries (and one for each session), and a query
// reads a chunk with one seek.
//
// An index list (a session's, an agent's or an outcome's postings) is
// stored append-only, as the chunks each flush writes (see auditPostings).
// A category's chunk still filling, its open chunk, is stored as segments:
// each flush writes the items added since the one before as a segment of
// their own (audit/c/<category>\0<position of its first item><auditSegmentMark>),
// in a chunk's form. When the chunk fills it is sealed: stored whole under
// its first position, its segments deleted, in one batch. Stored whole at
// each flush, the open chunk was rewritten at every live commit: a live
// audit event in a batch of its own wrote 2.5 KB, 29 times what it costs a
// rebuild (and half of a DAG node's writes). Where flushes cut an open chunk
// or an index list depends on the batches, so Verify reads a category's
// segments, or an index list's chunks, as one chunk.
//
// A position is the stream sequence of the event that added the item, so a
// list is in stream order. A category's items are its entries (position: the
// entry's sequence); an index's are postings (the entry's sequence, time and
// category). A tool call's entry is added at the call and completed in place
// by its result, whose outcome posting (at the result's position) is the
// only one behind an entry's own sequence: every item of a chunk (or
// segment) at position p is of an entry at or before p, which is what lets
// a query stop reading.
var auditChunkItems = 32 // a variable for tests, which fold few events

// auditFirstItems is how many items a list's first chunk has room for.
const auditFirstItems = 8

// auditSegmentMark ends the key of an open chunk's segment, after the
// position of its first item: a segment sorts after a sealed chunk at the
// same position (the two are never stored at once) and before the next
// position's, so one seek finds the chunk or segment that holds an item.
const auditSegmentMark = 1

// auditAmendMark follows a sealed chunk's key and precedes an entry's
// sequence in the key of an amendment: the entry of a tool call completed by
// its result after the call's chunk was sealed and written, stored as
// appendAuditEntry stores it. The chunk is never written again: a result
// rewrote it whole (2.7 KB) when its call's chunk had filled in between, as
// calls of many sessions at once mostly do. Readers read a chunk with its
// amendments, which sort after it and before the next chunk.
const auditAmendMark = 2

// auditOpenSuffix follows a list's prefix in the cache key of its open
// chunk, the object whose encode writes its segments: never a stored key.
// Verify names a list's segments, read as one chunk, with it.
const auditOpenSuffix = "\xff\xff\xff\xff\xff\xff\xff\xff\xff"

// auditChunkFormat is the first byte of a stored chunk.
const auditChunkFormat = 2

// auditItem is one item of a chunk: the sequence of the entry it is (or
// posts) and where its bytes (appendAuditEntry, or appendAuditPosting) are
// in the chunk's buffer.
type auditItem struct {
	seq    uint64
	off, n uint32
}

// auditChunk is a run of a list's items, in position order. Their bytes
// share one buffer, so an item costs no allocation and the collector sees a
// chunk as a few pointers, not one an item: a rebuild holds every chunk it
// fills until it writes them.
type auditChunk struct {
	// ent is the cache entry that held the chunk when the fold last added
	// to it or stored it (see auditMemo.chunk); nil for a chunk read back.
	ent   *entry
	first uint64 // the position of the first item: the chunk's key, once sealed
	// hw is the latest time of an item of this chunk or of any before it in
	// the list (Unix nanoseconds): a --since query stops at the first chunk
	// whose hw is before it, however unordered the clocks that stamped the
	// entries were.
	hw    int64
	buf   []byte
	items []auditItem
	// waiting are the items of tool calls waiting for their result: an
	// entry is encoded when its result completes it or the chunk is
	// stored, whichever comes first, not at the call and again at the
	// result (a rebuild's tool calls are most of its audit entries).
	waiting []auditWaiting
	// segs are the segments of an open chunk that flushes wrote, together
	// items[:stored]; pend is the position of items[stored], the first
	// item no flush wrote yet. A sealed chunk's segs are the ones its
	// encode deletes.
	segs   []auditSeg
	stored int
	pend   uint64
}

// auditChunkBytes and auditItemBytes size a chunk for memBytes.
var (
	auditChunkBytes = int(reflect.TypeFor[auditChunk]().Size())
	auditItemBytes  = int(reflect.TypeFor[auditItem]().Size())
	auditSegBytes   = int(reflect.TypeFor[auditSeg]().Size())
)

// memBytes is what the chunk holds in memory (see sizer): it grows with
// every entry added, and an open chunk is written a segment at a time, so
// what a flush writes of it says little of its size.
func (c *auditChunk) memBytes() int {
	return auditChunkBytes + cap(c.buf) + cap(c.items)*auditItemBytes + cap(c.segs)*auditSegBytes + 16*cap(c.waiting)
}

// auditSeg is a stored segment of an open chunk: its items from start to
// the next segment's start (or the chunk's stored), under the position of
// the first, first. hw is the list's through its last item; dirty: an item
// of it changed since it was written (a tool result completed a call's
// entry), so the next flush writes it again.
type auditSeg struct {
	first uint64
	hw    int64
	start int
	dirty bool
}

// auditWaiting is item i of a chunk, the entry of a waiting call.
type auditWaiting struct {
	i    int
	call *auditCall
}

// add appends the item of entry seq, whose bytes are b.
func (c *auditChunk) add(seq uint64, b []byte) {
	c.items = append(c.items, auditItem{seq: seq, off: uint32(len(c.buf)), n: uint32(len(b))})
	c.buf = append(c.buf, b...)
}

// set makes b the bytes of item i. Its old bytes stay in the buffer until
// the chunk is stored, which leaves them out.
func (c *auditChunk) set(i int, b []byte) {
	if len(c.buf)+len(b) > cap(c.buf) {
		// Results complete a chunk's calls one by one: room for as many
		// entries again as it has items, or its buffer doubled five times.
		c.buf = slices.Grow(c.buf, len(b)*len(c.items))
	}
	c.items[i].off, c.items[i].n = uint32(len(c.buf)), uint32(len(b))
	c.buf = append(c.buf, b...)
	c.waiting = slices.DeleteFunc(c.waiting, func(w auditWaiting) bool { return w.i == i })
	if i < c.stored {
		// The last segment starting at or before i holds it.
		j, found := slices.BinarySearchFunc(c.segs, i, func(sg auditSeg, i int) int { return cmp.Compare(sg.start, i) })
		if !found {
			j--
		}
		c.segs[j].dirty = true
	}
}

// settle encodes the entries of the waiting calls' items as they are now.
func (c *auditChunk) settle() {
	for _, w := range c.waiting {
		off := len(c.buf)
		c.buf = w.call.appendEntry(c.buf, nil)
		c.items[w.i].off, c.items[w.i].n = uint32(off), uint32(len(c.buf)-off)
	}
	c.waiting = nil
}

func (c *auditChunk) bytes(i int) []byte {
	it := c.items[i]
	return c.buf[it.off : it.off+it.n]
}

// encode writes c under k: an open chunk (k ends in auditOpenSuffix) as
// the segments that are new or changed, a sealed one whole, its segments
// deleted in the same batch.
func (c *auditChunk) encode(b *pebble.Batch, k []byte, s *scratch) error {
	c.settle()
	prefix, open := bytes.CutSuffix(k, []byte(auditOpenSuffix))
	if open {
		return c.encodeSegments(b, prefix, s)
	}
	s.val = appendAuditChunk(s.val[:0], c.first, c.hw, c, 0, len(c.items))
	if err := b.Set(k, s.val, nil); err != nil {
		return err
	}
	prefix = k[:len(k)-8]
	for _, sg := range c.segs {
		s.key = appendAuditSegmentKey(append(s.key[:0], prefix...), sg.first)
		if err := b.Delete(s.key, nil); err != nil {
			return err
		}
	}
	c.segs, c.stored = nil, 0 // deleted: a later write of the chunk has none to delete
	return nil
}

// encodeSegments writes the items no flush wrote yet as a new segment of
// the open chunk c, and the segments whose items changed again.
func (c *auditChunk) encodeSegments(b *pebble.Batch, prefix []byte, s *scratch) error {
	if c.stored < len(c.items) {
		c.segs = append(c.segs, auditSeg{first: c.pend, hw: c.hw, start: c.stored, dirty: true})
		c.stored = len(c.items)
	}
	for j := range c.segs {
		sg := &c.segs[j]
		if !sg.dirty {
			continue
		}
		sg.dirty = false
		end := c.stored
		if j+1 < len(c.segs) {
			end = c.segs[j+1].start
		}
		s.val = appendAuditChunk(s.val[:0], sg.first, sg.hw, c, sg.start, end)
		s.key = appendAuditSegmentKey(append(s.key[:0], prefix...), sg.first)
		if err := b.Set(s.key, s.val, nil); err != nil {
			return err
		}
	}
	return nil
}

// appendAuditChunk appends the stored form of c's items from up to to as
// a chunk (or a segment) at position first whose hw is hw: the format,
// first, hw and the item count, then each item's sequence and its bytes
// with their length.
func appendAuditChunk(b []byte, first uint64, hw int64, c *auditChunk, from, to int) []byte {
	b = appendAuditChunkHead(b, first, hw, to-from)
	for i := from; i < to; i++ {
		b = appendAuditItem(b, c.items[i].seq, c.bytes(i))
	}
	return b
}

// appendAuditChunkHead appends what a stored chunk of n items starts with.
func appendAuditChunkHead(b []byte, first uint64, hw int64, n int) []byte {
	b = append(b, auditChunkFormat)
	b = binary.AppendUvarint(b, first)
	b = binary.AppendVarint(b, hw)
	return binary.AppendUvarint(b, uint64(n))
}

// appendAuditItem appends a stored chunk's item: the sequence of its entry
// and its bytes, v.
func appendAuditItem(b []byte, seq uint64, v []byte) []byte {
	b = binary.AppendUvarint(b, seq)
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

// addSegment appends the items of v, a stored segment, to the open chunk
// c: a list's segments, added in position order, are its open chunk.
func (c *auditChunk) addSegment(v []byte) error {
	r, err := newAuditChunkReader(v)
	if err != nil {
		return err
	}
	if len(c.segs) == 0 {
		c.first = r.first
	}
	c.segs = append(c.segs, auditSeg{first: r.first, hw: r.hw, start: len(c.items)})
	c.hw = r.hw
	for {
		seq, b, ok, err := r.next()
		if err != nil {
			return err
		}
		if !ok {
			c.stored = len(c.items)
			return nil
		}
		c.add(seq, b)
	}
}

// auditChunkReader reads a stored chunk item by item, its bytes not copied.
type auditChunkReader struct {
	auditDecoder
	first uint64
	hw    int64
	n     uint64
}

func newAuditChunkReader(v []byte) (*auditChunkReader, error) {
	if len(v) == 0 || v[0] != auditChunkFormat {
		return nil, fmt.Errorf("audit chunk: not format %d", auditChunkFormat)
	}
	r := &auditChunkReader{auditDecoder: auditDecoder{recordReader{b: v[1:]}}}
	r.first = r.uvarint()
	r.hw = r.varint()
	r.n = r.uvarint()
	return r, r.err
}

// next returns the next item's entry sequence and bytes (aliasing the
// chunk), false at the end.
func (r *auditChunkReader) next() (uint64, []byte, bool, error) {
	if r.n == 0 || r.err != nil {
		if r.err == nil && len(r.b) > 0 {
			r.err = fmt.Errorf("%d bytes after the chunk", len(r.b))
		}
		return 0, nil, false, r.err
	}
	r.n--
	seq := r.uvarint()
	b := r.bytes()
	return seq, b, r.err == nil, r.err
}

// find returns the index of the item of entry seq in c (nil: none).
func (c *auditChunk) find(seq uint64) (int, bool) {
	if c == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(c.items, seq, func(it auditItem, seq uint64) int { return cmp.Compare(it.seq, seq) })
}

// decodeAuditChunk reads a chunk appendAuditChunk stored into v, which
// becomes its buffer: the caller gives it up.
func decodeAuditChunk(v []byte) (*auditChunk, error) {
	r, err := newAuditChunkReader(v)
	if err != nil {
		return nil, err
	}
	c := &auditChunk{first: r.first, hw: r.hw, buf: v, items: make([]auditItem, 0, min(r.n, uint64(auditChunkItems)))}
	for {
		seq, b, ok, err := r.next()
		if err != nil {
			return nil, fmt.Errorf("audit chunk: %w", err)
		}
		if !ok {
			// The buffer ends at the chunk's end: an item added later
			// must not grow it over bytes some other slice holds.
			c.buf = slices.Clip(c.buf)
			return c, nil
		}
		c.items = append(c.items, auditItem{seq: seq, off: uint32(len(v) - len(r.b) - len(b)), n: uint32(len(b))})
	}
}

// auditListPrefix is the prefix of the list dim ('c' a category's entries,
// 's' a session's, 'a' an agent's, 'o' an outcome's postings) for value.
func auditListPrefix(dim byte, value string) []byte {
	return appendAuditListPrefix(nil, dim, value)
}

func appendAuditListPrefix(b []byte, dim byte, value string) []byte {
	b = append(b, "audit/"...)
	b = append(b, dim, '/')
	b = append(b, value...)
	return append(b, sep)
}

// appendAuditChunkKey appends the key of the list's chunk at first to b.
func appendAuditChunkKey(b []byte, dim byte, value string, first uint64) []byte {
	return binary.BigEndian.AppendUint64(appendAuditListPrefix(b, dim, value), first)
}

// appendAuditSegmentKey appends the rest of the key of an open chunk's
// segment at first to b, its list's prefix.
func appendAuditSegmentKey(b []byte, first uint64) []byte {
	return append(binary.BigEndian.AppendUint64(b, first), auditSegmentMark)
}

// appendAuditAmendKey appends the rest of the key of the amendment of the
// entry seq to b, the key of its sealed chunk.
func appendAuditAmendKey(b []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, auditAmendMark), seq)
}

// auditListLen returns the length of the list prefix of k when k is an
// audit list's key, else 0.
func auditListLen(k []byte) int {
	if len(k) < len("audit/c/x\x00") || !bytes.HasPrefix(k, []byte("audit/")) || k[7] != '/' || strings.IndexByte(auditDims, k[6]) < 0 {
		return 0
	}
	// A list's value holds no separator: the first one ends its prefix.
	i := bytes.IndexByte(k[8:], sep)
	if i < 0 {
		return 0
	}
	return i + 9
}

// The kinds of a list's keys (auditKeyKind).
const (
	auditSealedKey  = 'c' // a sealed chunk
	auditSegmentKey = 's' // a segment of the open chunk
	auditAmendKey   = 'a' // an amendment of a sealed chunk
)

// auditKeyKind says what k, a key of the list whose prefix is n bytes long,
// is: auditSealedKey, auditSegmentKey, auditAmendKey, or 0 (not a list's).
func auditKeyKind(k []byte, n int) byte {
	switch {
	case n == 0 || len(k) < n+8:
		return 0
	case len(k) == n+8:
		return auditSealedKey
	case len(k) == n+9 && k[n+8] == auditSegmentMark:
		return auditSegmentKey
	case len(k) == n+17 && k[n+8] == auditAmendMark:
		return auditAmendKey
	}
	return 0
}

// readAuditAmends reads the amendments of a sealed chunk from it, at the
// last of them, back to the chunk (where it stops): each amended entry's
// bytes by its sequence (nil: none; it was not at an amendment). n is the
// length of the list's prefix.
func readAuditAmends(it *pebble.Iterator, n int) (map[uint64][]byte, error) {
	var amends map[uint64][]byte
	for it.Valid() && auditKeyKind(it.Key(), n) == auditAmendKey {
		if amends == nil {
			amends = map[uint64][]byte{}
		}
		amends[binary.BigEndian.Uint64(it.Key()[n+9:])] = slices.Clone(it.Value())
		it.Prev()
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if amends != nil && (!it.Valid() || auditKeyKind(it.Key(), n) != auditSealedKey) {
		return nil, fmt.Errorf("%d amended entries without their chunk", len(amends))
	}
	return amends, nil
}

// auditAmend is an amendment's bytes (see auditAmendMark) waiting for the
// flush that writes it.
type auditAmend []byte

func (a auditAmend) encode(b *pebble.Batch, k []byte, _ *scratch) error { return b.Set(k, a, nil) }

// amend makes each of amends the bytes of its entry in c.
func (c *auditChunk) amend(amends map[uint64][]byte) error {
	for seq, b := range amends {
		i, ok := c.find(seq)
		if !ok {
			return fmt.Errorf("an amendment of seq %d, not in the chunk at %d", seq, c.first)
		}
		c.set(i, b)
	}
	return nil
}

// readAuditOpen reads the open chunk of the list at prefix from its
// segments, the last keys of the list (nil: none).
func readAuditOpen(r pebble.Reader, prefix []byte) (*auditChunk, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var segs [][]byte // newest first
	for ok := it.Last(); ok && auditKeyKind(it.Key(), len(prefix)) == auditSegmentKey; ok = it.Prev() {
		segs = append(segs, slices.Clone(it.Value()))
	}
	if err := it.Error(); err != nil || len(segs) == 0 {
		return nil, err
	}
	c := &auditChunk{}
	for j := len(segs) - 1; j >= 0; j-- {
		if err := c.addSegment(segs[j]); err != nil {
			return nil, fmt.Errorf("audit segment %d of %q: %w", len(segs)-j, prefix, err)
		}
	}
	return c, nil
}

// appendAuditCallKey appends the key of a pending tool call to b.
func appendAuditCallKey(b []byte, call string) []byte {
	return append(append(b, auditCallPrefix...), call...)
}

// auditCallPrefix starts the keys of pending tool calls.
const auditCallPrefix = "audit/call/"

// loadAudit is load for an audit object stored in a form of its own (a
// pending call): cached, else decoded from Pebble. It returns the object's
// cache entry too (nil when there is no object), to store a change with.
func loadAudit[T any](t *tx, k []byte, decode func([]byte) (*T, error)) (*T, *entry, error) {
	if e, ok := t.cache.get(k); ok {
		o, _ := e.obj.(*T)
		return o, e, nil
	}
	raw, err := t.getRaw(k)
	if err != nil || raw == nil {
		if raw == nil && err == nil {
			t.missing(k)
		}
		return nil, nil, err
	}
	o, err := decode(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("decode %q: %w", k, err)
	}
	return o, t.cache.putRead(k, o, len(raw)), nil
}

// auditMemo is what the audit fold keeps beside the fold's cache, so that
// most of its events look nothing up there: an entry's category, session
// and agent open chunks, a tool call's pending record and the chunk its
// result completes were four lookups in a map of a rebuild's 150,000
// objects, and half of the audit's cost to a rebuild.
type auditMemo struct {
	// open is the cache entry of each category's open chunk. It holds an
	// entry until the cache drops it (entry.gone), not only until the
	// next eviction.
	open map[string]*entry
	// posts are the index postings waiting for the next write of the
	// objects (see auditPostings).
	posts auditPostings
	// calls are the tool calls waiting for their result since the last
	// flush, by call id. A flush stores them as the cache's transient
	// objects under their keys, where a result after it (or after a
	// restart, in Pebble) finds them: a call and its result in the same
	// flush, as a rebuild's mostly are, cost the cache nothing.
	calls map[string]*auditCall
	// stored are the ids of the calls a fold with a key filter handed to
	// the cache, until their result: when the audit projection started
	// empty, the only call records Pebble can hold, so a result of a call
	// from calls deletes none without asking the filter (six random reads
	// of its 8 MiB, a tenth of the audit's fold).
	stored map[string]struct{}
	// fresh is the key filter freshCalls answered for (nil: none yet), and
	// freshCalls whether call records are in a projection it knows started
	// empty: one answer a fold, not one a tool result.
	fresh      *keyFilter
	freshCalls bool
}

// auditDims are the lists' dimensions: a category's entries, a session's,
// an agent's and an outcome's postings.
const auditDims = "csao"

// reset forgets everything, with the cache.
func (m *auditMemo) reset() {
	clear(m.open)
	clear(m.calls)
	m.posts.reset()
}

// callsFresh reports whether no call record was stored before this fold
// but those stored lists (see stored).
func (m *auditMemo) callsFresh(f *keyFilter) bool {
	if f == nil {
		return false
	}
	if m.fresh != f {
		m.fresh, m.freshCalls = f, f.fresh([]byte(auditCallPrefix))
	}
	return m.freshCalls
}

// spill hands the waiting calls to c, to be flushed.
func (m *auditMemo) spill(c *cache) {
	var k []byte
	for id, call := range m.calls {
		k = appendAuditCallKey(k[:0], id)
		c.putTransient(k, call)
		if c.written != nil {
			if m.stored == nil {
				m.stored = map[string]struct{}{}
			}
			m.stored[id] = struct{}{}
		}
	}
	clear(m.calls)
}

// chunk returns c's cache entry when the memo can vouch that it still holds
// c (nil: look it up).
func (m *auditMemo) chunk(c *auditChunk) *entry {
	if c == nil || c.ent == nil || c.ent.gone || c.ent.obj != c {
		return nil
	}
	return c.ent
}

// loadAuditOpen returns the open chunk of category's list and its cache
// entry (nil and nil: none), read from its segments when it is not cached.
// The key of the entry, in t.kbuf, is the list's prefix and
// auditOpenSuffix.
func loadAuditOpen(t *tx, category string) (*auditChunk, *entry, error) {
	k := append(appendAuditListPrefix(t.kbuf[:0], 'c', category), auditOpenSuffix...)
	t.kbuf = k
	if e, ok := t.cache.get(k); ok {
		c, _ := e.obj.(*auditChunk)
		return c, e, nil
	}
	// The open chunk's entry is written when its segments are: a key the
	// filter never saw has none.
	if t.knownAbsent(k) {
		return nil, nil, nil
	}
	c, err := readAuditOpen(t.db, k[:len(k)-len(auditOpenSuffix)])
	if err != nil {
		return nil, nil, fmt.Errorf("audit: the open chunk of %s: %w", category, err)
	}
	if c == nil {
		t.missing(k)
		return nil, nil, nil
	}
	return c, t.cache.put(k, c, false), nil
}

// openAuditChunk returns the cache entry of the open chunk of category's
// list, created (with no chunk yet) if there is none.
func openAuditChunk(t *tx, category string) (*entry, error) {
	m := &t.cache.audit
	if e, ok := m.open[category]; ok && !e.gone {
		return e, nil
	}
	_, e, err := loadAuditOpen(t, category)
	if err != nil {
		return nil, err
	}
	if e == nil {
		e = t.cache.put(t.kbuf, nil, true) // the caller adds the chunk
	}
	if m.open == nil {
		m.open = map[string]*entry{}
	}
	m.open[category] = e
	return e, nil
}

// addAuditEntry adds the item of entry seq at at, whose bytes are b, to
// its category's list, and returns the chunk it is in. A full open chunk
// is sealed first: stored under its own position, where little reads it
// again (a tool result completing an entry).
func addAuditEntry(t *tx, category string, seq uint64, at int64, b []byte) (*auditChunk, error) {
	e, err := openAuditChunk(t, category) // b may be in t.vbuf, not in t.kbuf
	if err != nil {
		return nil, err
	}
	c, _ := e.obj.(*auditChunk)
	switch {
	case c == nil:
		// Room for a few items like this one: a session's list grew its
		// buffers five or six times, a tenth of the audit's allocations.
		c = &auditChunk{first: seq, hw: at, items: make([]auditItem, 0, auditFirstItems), buf: make([]byte, 0, auditFirstItems*len(b))}
	case len(c.items) >= auditChunkItems:
		c.ent = t.cache.putTransient(appendAuditChunkKey(nil, 'c', category, c.first), c)
		// A list that fills a chunk fills the next: its items grow once.
		c = &auditChunk{first: seq, hw: c.hw, items: make([]auditItem, 0, auditChunkItems), buf: make([]byte, 0, len(c.buf))}
	}
	c.hw = max(c.hw, at)
	if c.stored == len(c.items) {
		c.pend = seq // the next segment's
	}
	c.add(seq, b)
	c.ent = e
	t.cache.update(e, c)
	return c, nil
}

// appendAuditPosting appends an index posting's bytes: the entry's time
// (Unix nanoseconds) and category.
func appendAuditPosting(b []byte, at int64, category string) []byte {
	return append(binary.AppendVarint(b, at), category...)
}

// decodeAuditPosting reads appendAuditPosting's bytes.
func decodeAuditPosting(b []byte) (time.Time, string, error) {
	at, n := binary.Varint(b)
	if n <= 0 {
		return time.Time{}, "", errors.New("audit posting: truncated")
	}
	return time.Unix(0, at).UTC(), string(b[n:]), nil
}

// auditPostings are the index postings (of a session's, an agent's or an
// outcome's list) added since the objects were last written. A posting
// never changes, so an index list is stored append-only: each write of the
// objects stores the postings each list got since the one before as new
// chunks of up to auditChunkItems items, under the position of their first
// (audit/<dim>/<value>\0<position>), and never reads, rewrites or deletes
// a chunk. Until then the postings wait in one slice without pointers, and
// a list is an index in lists. Kept in the fold's cache as open chunks,
// like a category's, the lists of a rebuild's 20,000 sessions at once were
// about 1 KB each of objects the collector marked at every collection (and
// a cache entry each, a segment to seal and delete): most of what the
// audit cost a rebuild.
type auditPostings struct {
	ids   map[string]uint32 // by the list's prefix
	names []string          // the lists' prefixes, by id
	lists []auditPostList
	// pend are the waiting postings in stream order, each list's linked
	// from its head (auditPostList.head, then auditPosting.next): a write
	// walks each list's in order, where sorting them by list was half of
	// what a write cost.
	pend []auditPosting
	// forgetAt is how many lists forget lets the fold know before it
	// forgets the ones no posting was added to since it last did.
	forgetAt int
	// filter is the key filter the lists' marked flags are about.
	filter *keyFilter
	// few are the lists of agents and outcomes (dimensions of few values)
	// posted to last, next the one to replace: a posting finds its list
	// there, not in ids, which holds every session's list as well (its
	// lookups were half of postAudit's cost).
	few  [4]auditFewList
	next int
}

// auditFewList is a list that auditPostings.few remembers: the list
// dim/value, whose id is id (none when dim is 0).
type auditFewList struct {
	dim   byte
	value string
	id    uint32
}

// auditNoPosting ends a list's chain of waiting postings.
const auditNoPosting = math.MaxUint32

// auditPostList is what the next chunk of a list needs to know of the
// chunks stored before it, and where its waiting postings are in pend.
type auditPostList struct {
	hw         int64  // of the last chunk stored (math.MinInt64: none)
	head, tail uint32 // its first and last waiting posting (auditNoPosting: none)
	used       bool   // a posting was added since forget last ran
	marked     bool   // the list's prefix is in filter: a chunk of it was written
}

// auditPosting is a waiting posting at position pos: of the entry seq,
// whose time is at and whose category is schemas.AuditCategories[category].
// next is the list's next waiting posting (auditNoPosting: none).
type auditPosting struct {
	next     uint32
	category uint8
	pos, seq uint64
	at       int64
}

// auditPostListsKept is how many lists the fold knows at least before it
// forgets the ones no posting was added to for a while: a list it forgot
// reads its last chunk back at its next posting.
var auditPostListsKept = 1 << 16 // a variable for tests

// postAudit adds the posting of entry seq at at, of category, at position
// pos of the list dim/value.
func postAudit(t *tx, dim byte, value string, pos, seq uint64, at int64, category string) error {
	ps := &t.cache.audit.posts
	id, err := ps.list(t, dim, value)
	if err != nil {
		return err
	}
	l := &ps.lists[id]
	l.used = true
	i := uint32(len(ps.pend))
	if l.head == auditNoPosting {
		l.head = i
	} else {
		ps.pend[l.tail].next = i
	}
	l.tail = i
	ps.pend = append(ps.pend, auditPosting{next: auditNoPosting, category: uint8(slices.Index(schemas.AuditCategories, category)), pos: pos, seq: seq, at: at})
	return nil
}

// list returns the id of the list dim/value, which it adds to the lists
// the fold knows if it is not one of them.
func (ps *auditPostings) list(t *tx, dim byte, value string) (uint32, error) {
	if dim != 's' {
		for _, f := range ps.few {
			if f.dim == dim && f.value == value {
				return f.id, nil
			}
		}
	}
	k := appendAuditListPrefix(t.kbuf[:0], dim, value)
	t.kbuf = k
	id, ok := ps.ids[string(k)]
	if !ok {
		hw, err := lastAuditHW(t, k)
		if err != nil {
			return 0, err
		}
		if ps.ids == nil {
			ps.ids = map[string]uint32{}
		}
		id = uint32(len(ps.lists))
		ps.ids[string(k)] = id
		ps.names = append(ps.names, string(k))
		ps.lists = append(ps.lists, auditPostList{hw: hw, head: auditNoPosting, tail: auditNoPosting})
	}
	if dim != 's' {
		ps.few[ps.next] = auditFewList{dim: dim, value: value, id: id}
		ps.next = (ps.next + 1) % len(ps.few)
	}
	return id, nil
}

// lastAuditHW returns the hw of the last chunk stored of the list at
// prefix (math.MinInt64: none).
func lastAuditHW(t *tx, prefix []byte) (int64, error) {
	if t.knownAbsent(prefix) {
		return math.MinInt64, nil
	}
	it, err := t.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return math.MinInt64, it.Error()
	}
	r, err := newAuditChunkReader(it.Value())
	if err != nil {
		return 0, fmt.Errorf("audit list %q: %w", prefix, err)
	}
	return r.hw, nil
}

// write stores the waiting postings into b, split as cache.flush splits
// the objects, marks their lists in the key filter f (nil: none), and
// returns the batch it ends in.
func (ps *auditPostings) write(b *pebble.Batch, split func(*pebble.Batch) (*pebble.Batch, error), s *scratch, f *keyFilter) (*pebble.Batch, error) {
	if ps.filter != f {
		for i := range ps.lists {
			ps.lists[i].marked = false
		}
		ps.filter = f
	}
	chunk := make([]auditPosting, auditChunkItems)
	for id := range ps.lists {
		l := &ps.lists[id]
		for l.head != auditNoPosting {
			// The list's next postings, up to a chunk's.
			n := 0
			for ; n < len(chunk) && l.head != auditNoPosting; n++ {
				chunk[n] = ps.pend[l.head]
				l.head = chunk[n].next
			}
			if f != nil && !l.marked {
				f.add(ps.names[id])
				l.marked = true
			}
			if split != nil {
				var err error
				if b, err = split(b); err != nil {
					return b, err
				}
			}
			s.val = appendAuditPostings(s.val[:0], l, chunk[:n])
			s.key = binary.BigEndian.AppendUint64(append(s.key[:0], ps.names[id]...), chunk[0].pos)
			if err := b.Set(s.key, s.val, nil); err != nil {
				return b, err
			}
		}
		l.tail = auditNoPosting
	}
	ps.pend = ps.pend[:0]
	return b, nil
}

// appendAuditPostings appends ps, postings of list l, as a chunk in
// appendAuditChunk's form, and moves l's hw to the chunk's.
func appendAuditPostings(b []byte, l *auditPostList, ps []auditPosting) []byte {
	for _, p := range ps {
		l.hw = max(l.hw, p.at)
	}
	b = appendAuditChunkHead(b, ps[0].pos, l.hw, len(ps))
	var item [binary.MaxVarintLen64 + 16]byte
	for _, p := range ps {
		v := appendAuditPosting(item[:0], p.at, schemas.AuditCategories[p.category])
		b = appendAuditItem(b, p.seq, v)
	}
	return b
}

// forget forgets the lists no posting was added to since it last ran,
// once the fold knows forgetAt of them, but those with waiting postings.
// Call it only when every batch written is committed: a list forgotten
// reads its last chunk back.
func (ps *auditPostings) forget() {
	if len(ps.lists) < max(ps.forgetAt, auditPostListsKept) {
		return
	}
	kept := 0
	for id, l := range ps.lists {
		name := ps.names[id]
		if !l.used && l.head == auditNoPosting {
			delete(ps.ids, name)
			continue
		}
		l.used = false
		ps.ids[name] = uint32(kept)
		ps.lists[kept], ps.names[kept] = l, name
		kept++
	}
	clear(ps.names[kept:])
	ps.lists, ps.names = ps.lists[:kept], ps.names[:kept]
	ps.forgetAt = 2 * kept
	ps.few = [len(ps.few)]auditFewList{} // of the old ids
}

// reset forgets every list and drops the waiting postings.
func (ps *auditPostings) reset() {
	ps.few = [len(ps.few)]auditFewList{}
	clear(ps.ids)
	clear(ps.names)
	ps.names, ps.lists, ps.pend = ps.names[:0], ps.lists[:0], ps.pend[:0]
}

// auditCall is a tool call's entry waiting for its result, with the
// position of the chunk of its category the entry is in: in the audit's
// memo until a flush, then a transient cached object (it leaves the cache
// once committed) stored under the call's key (audit/call/<id>), and read
// back by the result. A call and its result folded between two flushes, as
// a rebuild's mostly are, cost no cached object and no write.
//
// The call keeps its entry stored (b), not the record it was made from: a
// record held the call's strings and was two thirds of a 640-byte call, and
// at 1M events 20,000 calls wait at once (a round of every session's tool
// calls), each live heap byte one the collector marks and one less it may
// allocate before it runs again.
type auditCall struct {
	chunk    uint64
	c        *auditChunk // that chunk, while the memo vouches for it; nil read back
	seq      uint64
	at       int64
	category string
	// b is the entry's stored form as the call made it, but its detail
	// count: its head (appendAuditHead, which a result does not change),
	// its outcome and reason from head to dets, then each detail i
	// (appendAuditDetail) ending at ends[i], its name names[i]. A result
	// adds its details among them in name order.
	b             []byte
	head, dets, n uint32
	ends          [auditCallDetails]uint32
	names         [auditCallDetails]string
	// room holds an entry of the usual size: the call is one allocation
	// of 256 bytes.
	room [128]byte
}

// auditCallDetails is how many details a tool call's entry has at most
// before its result adds its own.
const auditCallDetails = len(auditRecord{}.details) - auditResultDetails

func newAuditCall(chunk uint64, c *auditChunk, r *auditRecord) *auditCall {
	call := &auditCall{chunk: chunk, c: c, seq: r.seq, at: r.at, category: r.category}
	b := appendAuditHead(call.room[:0], r)
	call.head = uint32(len(b))
	b = appendAuditText(appendAuditWord(b, r.outcome), r.reason)
	call.dets = uint32(len(b))
	for i, d := range r.details[:r.n] { // auditOf and decodeAuditCall give a call no more
		b = appendAuditDetail(b, &d)
		call.ends[i], call.names[i] = uint32(len(b)), d.name
	}
	call.b, call.n = b, uint32(r.n)
	return call
}

// appendEntry appends the stored form of the call's entry: as the call
// made it (res nil), or as its result res completes it (its outcome,
// reason and details; the call's details too, unless res has one of the
// same name).
func (c *auditCall) appendEntry(b []byte, res *auditRecord) []byte {
	n := int(c.n)
	if res == nil {
		b = append(b, c.b[:c.dets]...)
		b = binary.AppendUvarint(b, uint64(n))
		return append(b, c.b[c.dets:]...)
	}
	b = append(b, c.b[:c.head]...)
	b = appendAuditText(appendAuditWord(b, res.outcome), res.reason)
	same := 0
	for i := range n {
		if res.has(c.names[i]) {
			same++
		}
	}
	b = binary.AppendUvarint(b, uint64(n+res.n-same))
	start, j := c.dets, 0
	for i := range n {
		for j < res.n && res.details[j].name <= c.names[i] {
			b = appendAuditDetail(b, &res.details[j])
			j++
		}
		if !res.has(c.names[i]) {
			b = append(b, c.b[start:c.ends[i]]...)
		}
		start = c.ends[i]
	}
	for ; j < res.n; j++ {
		b = appendAuditDetail(b, &res.details[j])
	}
	return b
}

// outcome returns the outcome and reason of the call's entry.
func (c *auditCall) outcome() (string, string) {
	d := auditDecoder{recordReader{b: c.b[c.head:c.dets]}}
	return d.word(), d.word()
}

func (c *auditCall) encode(b *pebble.Batch, k []byte, s *scratch) error {
	s.val = c.appendEntry(binary.AppendUvarint(s.val[:0], c.chunk), nil)
	return b.Set(k, s.val, nil)
}

// applyAudit files the events the audit categories cover: an entry is added
// to its category's list and posted to its session's, its agent's and, when
// it is not allowed, its outcome's. A tool call's entry is completed by its
// result (outcome, exit code), so each call is one entry.
func applyAudit(t *tx, ev *event) error {
	env := ev.env
	if env == nil {
		return nil
	}
	if env.Type == schemas.TypeToolResult {
		return auditToolResult(t, ev)
	}
	var r auditRecord // on the stack unless it waits for a result
	if ok, err := auditOf(t, ev, &r); !ok {
		return err
	}
	r.seq, r.id, r.typ, r.at, r.session = ev.seq, env.ID, env.Type, env.Timestamp.UnixNano(), env.SessionID
	if r.agent == "" {
		r.agent = env.Source
	}
	if env.Type != schemas.TypeToolCall {
		t.vbuf = appendAuditRecord(t.vbuf[:0], &r)
		if _, err := addAuditEntry(t, r.category, r.seq, r.at, t.vbuf); err != nil {
			return err
		}
	} else {
		c, err := addAuditEntry(t, r.category, r.seq, r.at, nil)
		if err != nil {
			return err
		}
		// A tool run cut off by a crash is called again under the same call
		// id: the new call waits here instead, and the old one's entry stays
		// as it is in its chunk, whatever the batches.
		call := newAuditCall(c.first, c, &r)
		c.waiting = append(c.waiting, auditWaiting{i: len(c.items) - 1, call: call})
		m := &t.cache.audit
		if m.calls == nil {
			m.calls = map[string]*auditCall{}
		}
		m.calls[r.detail("call")] = call
	}
	for _, i := range [...]struct {
		dim   byte
		value string
	}{{'s', r.session}, {'a', r.agent}, {'o', r.outcome}} {
		if i.value == "" || i.dim == 'o' && i.value == schemas.OutcomeAllowed {
			continue
		}
		if err := postAudit(t, i.dim, i.value, r.seq, r.seq, r.at, r.category); err != nil {
			return err
		}
	}
	return nil
}

// decodeAuditCall reads a pending call's stored form.
func decodeAuditCall(raw []byte) (*auditCall, error) {
	chunk, n := binary.Uvarint(raw)
	if n <= 0 {
		return nil, errors.New("audit call: truncated")
	}
	e, err := decodeAuditEntry(raw[n:])
	if err != nil {
		return nil, err
	}
	// Its details go in the record's array, where its result adds its own:
	// a call's entry has only the details auditOf gives a tool call.
	if len(e.Details) > len(auditRecord{}.details)-auditResultDetails {
		return nil, fmt.Errorf("audit call: %d details, more than a tool call has", len(e.Details))
	}
	r := recordOf(e)
	r.extra = nil
	for k, v := range e.Details {
		r.text(k, v)
	}
	return newAuditCall(chunk, nil, &r), nil
}

// replaceAuditEntry stores b as the entry of sequence seq in the chunk of
// its category at position first: the open one, a sealed one still in the
// cache (not written yet), or else as an amendment of the sealed chunk.
func replaceAuditEntry(t *tx, first uint64, category string, seq uint64, b []byte) error {
	c, ce, err := loadAuditOpen(t, category)
	if err != nil {
		return err
	}
	if c == nil || c.first != first {
		k := appendAuditChunkKey(t.kbuf[:0], 'c', category, first)
		t.kbuf = k
		e, ok := t.cache.get(k)
		if !ok {
			// Written with the objects, as the chunk was: the audit's
			// cursor moves with them.
			t.kbuf = appendAuditAmendKey(k, seq)
			t.cache.putTransient(t.kbuf, auditAmend(slices.Clone(b)))
			return nil
		}
		c, ce = e.obj.(*auditChunk), e
	}
	i, found := c.find(seq)
	if !found {
		return fmt.Errorf("audit: the entry of seq %d is not in its chunk at %d", seq, first)
	}
	c.set(i, b)
	t.cache.update(ce, c)
	return nil
}

// auditEntryFormat is the first byte of a stored entry. Entries are stored
// in this compact binary form, not JSON: one is written for about every
// fourth event of a busy stream, and encoding/json was half of the audit
// projection's cost to a rebuild.
const auditEntryFormat = 3

// auditRecord is an entry as the fold builds and stores it: AuditEntry's
// fields, its time in Unix nanoseconds and its details in a small array
// sorted by name, numbers kept as numbers: a map an entry, and a string for
// each number in it, were a fifth of the audit's fold.
type auditRecord struct {
	seq                                                       uint64
	at                                                        int64
	id                                                        string
	typ                                                       schemas.Type
	category, action, session, agent, target, outcome, reason string
	// details are the first n, sorted by name; an audit_record's come in
	// its payload's map, extra, which the fold never changes (only tool
	// calls' entries are completed).
	details [6]auditDetail
	n       int
	extra   map[string]string
}

// auditResultDetails is how many details a tool result adds to its call's.
const auditResultDetails = 4

// auditDetail is a detail's name and value: text (followed by a slash and
// sub when isPath), or a number stored as its decimal digits (a signed one
// when signed).
type auditDetail struct {
	name, text, sub       string
	num                   uint64
	isNum, signed, isPath bool
}

// recordOf is e as the fold keeps it, its details in e's map.
func recordOf(e *AuditEntry) auditRecord {
	return auditRecord{seq: e.Seq, at: e.At.UnixNano(), id: e.ID, typ: e.Type, category: e.Category, action: e.Action,
		session: e.Session, agent: e.Agent, target: e.Target, outcome: e.Outcome, reason: e.Reason, extra: e.Details}
}

// set sets detail d.name to d, in name order.
func (r *auditRecord) set(d auditDetail) {
	i := 0
	for i < r.n && r.details[i].name < d.name {
		i++
	}
	if i == r.n || r.details[i].name != d.name {
		copy(r.details[i+1:r.n+1], r.details[i:r.n]) // no call gives a record more than it holds
		r.n++
	}
	r.details[i] = d
}

func (r *auditRecord) text(name, v string) { r.set(auditDetail{name: name, text: v}) }

// path sets detail name to dir + "/" + base, a string made only where it is
// stored: a tool call's node, whose concatenation was an allocation a call.
func (r *auditRecord) path(name, dir, base string) {
	r.set(auditDetail{name: name, text: dir, sub: base, isPath: true})
}

func (r *auditRecord) int(name string, v int64) {
	r.set(auditDetail{name: name, num: uint64(v), isNum: true, signed: true})
}

func (r *auditRecord) uint(name string, v uint64) {
	r.set(auditDetail{name: name, num: v, isNum: true})
}

// has reports whether r has a detail named name.
func (r *auditRecord) has(name string) bool {
	for _, d := range r.details[:r.n] {
		if d.name == name {
			return true
		}
	}
	return false
}

// detail returns the text of detail name ("": none).
func (r *auditRecord) detail(name string) string {
	for _, d := range r.details[:r.n] {
		if d.name == name {
			return d.text
		}
	}
	return ""
}

// appendAuditRecord appends r's stored form: the format, the sequence and
// time (Unix nanoseconds) as uvarints, then its strings and its details
// (sorted by name), each as appendAuditWord writes it.
func appendAuditRecord(b []byte, r *auditRecord) []byte {
	return appendAuditTail(appendAuditHead(b, r), r)
}

// appendAuditHead appends the part of r's stored form before its outcome.
func appendAuditHead(b []byte, r *auditRecord) []byte {
	b = append(b, auditEntryFormat)
	b = binary.AppendUvarint(b, r.seq)
	b = binary.AppendUvarint(b, uint64(r.at))
	// Only the fields that are mostly words are looked up: a lookup for
	// each string cost as much as the bytes it saved.
	b = appendAuditWord(appendAuditText(b, r.id), string(r.typ))
	b = appendAuditWord(appendAuditWord(b, r.category), r.action)
	b = appendAuditWord(appendAuditText(b, r.session), r.agent)
	return appendAuditText(b, r.target)
}

// appendAuditTail appends the rest of r's stored form: its outcome, reason
// and details.
func appendAuditTail(b []byte, r *auditRecord) []byte {
	b = appendAuditText(appendAuditWord(b, r.outcome), r.reason)
	if r.extra != nil {
		return appendAuditDetails(b, r.extra)
	}
	b = binary.AppendUvarint(b, uint64(r.n))
	for i := range r.details[:r.n] {
		b = appendAuditDetail(b, &r.details[i])
	}
	return b
}

// appendAuditDetail appends a detail's stored form: its name, then its
// text or its number's digits.
func appendAuditDetail(b []byte, d *auditDetail) []byte {
	b = appendAuditWord(b, d.name)
	if d.isPath {
		// Not an event id: stored as appendAuditText stores the joined
		// string.
		b = binary.AppendUvarint(b, uint64(len(d.text)+1+len(d.sub))<<2|auditLiteral)
		return append(append(append(b, d.text...), '/'), d.sub...)
	}
	if !d.isNum {
		return appendAuditText(b, d.text)
	}
	// Digits are never an event id: stored as appendAuditText stores their
	// string.
	var digits [24]byte
	v := strconv.AppendUint(digits[:0], d.num, 10)
	if d.signed {
		v = strconv.AppendInt(digits[:0], int64(d.num), 10)
	}
	return append(binary.AppendUvarint(b, uint64(len(v))<<2|auditLiteral), v...)
}

// appendAuditDetails appends the count of details and each, sorted by name.
func appendAuditDetails(b []byte, details map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(details)))
	var names [8]string // entries have a few details: sorted without allocating
	keys := names[:0]
	for k := range details {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendAuditText(appendAuditWord(b, k), details[k])
	}
	return b
}

// auditWords are the words entries are mostly made of (event types,
// categories, actions, agents, outcomes, detail names), stored as their
// index in those fields: an entry's bytes were a tenth of a rebuild's, and Pebble's work
// for them (its memtable, flushes, compression, compactions) a third of the
// audit's cost. The list is part of the stored form: append only, and bump
// the audit projection's version when it changes.
var auditWords = []string{
	// event types
	"tool_call", "llm_usage", "llm_response", "audit_record", "permission_request", "permission_decision",
	"prompt_rejected", "hook_decision", "dead_letter", "session_create", "session_complete", "session_suspend",
	"session_resume", "session_fork", "session_fail", "signal", "dag_execute", "workflow_complete", "task_failed",
	"pipeline_stage", "agent_restart", "schedule_add", "schedule_pause", "schedule_resume", "schedule_remove",
	"schedule_disable",
	// categories and outcomes
	"permission", "file", "process", "network", "llm", "session", "config", "allowed", "denied", "error", "asked",
	// actions
	"exec", "read_file", "write_file", "edit_file", "list", "glob", "grep", "call", "request", "allow", "deny",
	"create", "complete", "suspend", "resume", "fork", "fail", "pause", "cancel", "workflow_start", "hook_block",
	"kill", "write", "edit", "read", "user_add", "user_revoke",
	// agents
	"user", "engineer", "architect", "orchestrator", "worker", "guide", "tester", "inspector", "librarian",
	"designer", "academic", "system",
	// detail names and common values
	"node", "exit_code", "duration_ms", "result_seq", "tokens", "prompt_tokens", "completion_tokens",
	"cost_usd", "provider", "grant", "scope", "findings", "patterns", "point", "hook", "consumer", "stream_seq",
	"deliveries", "parent_seq", "nodes", "outcome", "succeeded", "failed", "skipped", "attempt", "loop", "size",
	"sha256", "pid", "signals", "role",
}

// auditWordIndex finds a word's index in auditWords.
var auditWordIndex = func() map[string]uint64 {
	m := make(map[string]uint64, len(auditWords))
	for i, w := range auditWords {
		if _, dup := m[w]; !dup {
			m[w] = uint64(i)
		}
	}
	return m
}()

// A stored string starts with a uvarint whose two low bits say what it is.
const (
	auditLiteral = 0 // the rest is the length; the bytes follow
	auditWord    = 1 // the rest is an index in auditWords
	auditUUID    = 2 // 16 bytes follow: a canonical lower-case UUID (event ids)
)

// appendAuditWord appends s, a known word as its index, else as
// appendAuditText does.
func appendAuditWord(b []byte, s string) []byte {
	if i, ok := auditWordIndex[s]; ok {
		return binary.AppendUvarint(b, i<<2|auditWord)
	}
	return appendAuditText(b, s)
}

// appendAuditText appends s: an event id as its 16 bytes, anything else as
// its length and bytes.
func appendAuditText(b []byte, s string) []byte {
	if u, ok := parseUUID(s); ok {
		return append(binary.AppendUvarint(b, auditUUID), u[:]...)
	}
	return append(binary.AppendUvarint(b, uint64(len(s))<<2|auditLiteral), s...)
}

// parseUUID reads a canonical lower-case UUID (8-4-4-4-12 hex digits).
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	bad := byte(0)
	j := 0
	for i := 0; i < 36; i += 2 {
		if s[i] == '-' {
			i--
			continue
		}
		hi, lo := hexDigits[s[i]], hexDigits[s[i+1]]
		bad |= hi | lo
		u[j] = hi<<4 | lo
		j++
	}
	return u, bad < 16
}

// hexDigits are the lower-case hex digits' values, 16 or more for every
// other byte: one table read a digit, and one test for all 32.
var hexDigits = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0xff
		}
	}
	return t
}()

// formatUUID writes u in canonical form.
func formatUUID(u []byte) string {
	const digits = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = digits[x>>4], digits[x&15]
		j += 2
	}
	return string(b[:])
}

// decodeAuditEntry reads an entry appendAuditEntry stored.
func decodeAuditEntry(v []byte) (*AuditEntry, error) {
	if len(v) == 0 || v[0] != auditEntryFormat {
		return nil, fmt.Errorf("audit entry: not format %d", auditEntryFormat)
	}
	d := auditDecoder{recordReader{b: v[1:]}}
	e := &AuditEntry{Seq: d.uvarint(), At: time.Unix(0, int64(d.uvarint())).UTC()}
	for _, s := range [...]*string{&e.ID, (*string)(&e.Type), &e.Category, &e.Action, &e.Session, &e.Agent, &e.Target, &e.Outcome, &e.Reason} {
		*s = d.word()
	}
	if n := d.uvarint(); n > 0 && d.err == nil {
		e.Details = make(map[string]string, min(n, uint64(len(d.b))))
		for i := uint64(0); i < n && d.err == nil; i++ {
			k := d.word()
			e.Details[k] = d.word()
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

// auditDecoder reads a stored audit record: its varints and byte strings
// (recordReader), and its words.
type auditDecoder struct{ recordReader }

// word reads a string appendAuditWord stored.
func (d *auditDecoder) word() string {
	x := d.uvarint()
	if d.err != nil {
		return ""
	}
	switch x & 3 {
	case auditLiteral:
		return string(d.take(x >> 2))
	case auditWord:
		if x>>2 >= uint64(len(auditWords)) {
			d.fail(fmt.Errorf("word %d of %d", x>>2, len(auditWords)))
			return ""
		}
		return auditWords[x>>2]
	case auditUUID:
		if x != auditUUID {
			d.fail(fmt.Errorf("id kind %d", x))
			return ""
		}
		if id := d.take(16); id != nil {
			return formatUUID(id)
		}
		return ""
	}
	d.fail(fmt.Errorf("string kind %d", x&3))
	return ""
}

// auditToolResult completes the entry of the call the result is of.
func auditToolResult(t *tx, ev *event) error {
	p, err := payloadOf[schemas.ToolResult](t, Audit, ev)
	if p == nil {
		return err
	}
	call, err := takeAuditCall(t, p.CallID)
	if err != nil || call == nil {
		return err // a result of a call from before the audit projection
	}
	// The result's part of the entry: its outcome and its details.
	r := &auditRecord{}
	r.outcome, r.reason = call.outcome()
	r.int("exit_code", int64(p.ExitCode))
	r.int("duration_ms", p.DurationMS)
	r.uint("result_seq", ev.seq)
	if p.Signal != "" {
		r.text("signal", p.Signal)
	}
	if !p.OK {
		r.outcome, r.reason = schemas.OutcomeError, p.Error
		if r.reason == "" {
			r.reason = p.Summary
		}
	}
	t.vbuf = call.appendEntry(t.vbuf[:0], r)
	if ce := t.cache.audit.chunk(call.c); ce != nil {
		i, _ := call.c.find(call.seq) // it is there: added with the call
		call.c.set(i, t.vbuf)
		t.cache.update(ce, call.c)
	} else if err := replaceAuditEntry(t, call.chunk, call.category, call.seq, t.vbuf); err != nil {
		return err
	}
	if p.OK {
		return nil
	}
	return postAudit(t, 'o', r.outcome, ev.seq, call.seq, call.at, call.category)
}

// takeAuditCall returns the call id's waiting call and deletes its record
// (nil: none).
func takeAuditCall(t *tx, id string) (*auditCall, error) {
	m := &t.cache.audit
	stored := false
	if len(m.stored) > 0 { // most results meet none: their call was in calls at no flush
		if _, stored = m.stored[id]; stored {
			delete(m.stored, id)
		}
	}
	if call, ok := m.calls[id]; ok {
		delete(m.calls, id)
		// A record of the same id stored before (of a run cut off by a
		// crash) goes too, as the cached one it replaced would have.
		if stored || !m.callsFresh(t.cache.written) {
			t.kbuf = appendAuditCallKey(t.kbuf[:0], id)
			t.cache.put(t.kbuf, nil, true)
		}
		return call, nil
	}
	t.kbuf = appendAuditCallKey(t.kbuf[:0], id)
	call, ce, err := loadAudit(t, t.kbuf, decodeAuditCall)
	if err != nil || call == nil {
		return nil, err
	}
	t.cache.update(ce, nil)
	return call, nil
}

// fileTools are the tools whose calls are file operations; every other
// tool call runs a process.
var fileTools = map[string]string{
	"read_file": "read", "write_file": "write", "edit_file": "edit", "list": "list", "glob": "glob", "grep": "grep",
}

// auditOf fills e with the entry an event makes (without the envelope's
// fields) and reports whether it makes one: most events are none of the
// audit's business.
func auditOf(t *tx, ev *event, e *auditRecord) (bool, error) {
	env := ev.env
	*e = auditRecord{outcome: schemas.OutcomeAllowed}
	switch env.Type {
	case schemas.TypeAuditRecord:
		p, err := payloadOf[schemas.AuditRecord](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason, e.extra = p.Category, p.Action, p.Target, p.Outcome, p.Reason, p.Details
	case schemas.TypePermissionRequest:
		p, err := payloadOf[schemas.PermissionRequest](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason, e.agent = schemas.AuditPermission, "request", p.Target, schemas.OutcomeAsked, p.Reason, p.Agent
		e.text("grant", p.Grant)
		e.text("call", p.CallID)
	case schemas.TypePermissionDecision:
		p, err := payloadOf[schemas.PermissionDecision](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.reason = schemas.AuditPermission, p.Decision, p.RequestID, p.Reason
		if p.Decision != schemas.DecisionAllow {
			e.outcome = schemas.OutcomeDenied
		}
		e.text("scope", p.Scope)
	case schemas.TypePromptRejected:
		p, err := payloadOf[schemas.PromptRejected](t, Audit, ev)
		if p == nil {
			return false, err
		}
		pats := make([]string, len(p.Findings))
		for i, f := range p.Findings {
			pats[i] = f.Pattern
		}
		e.category, e.action, e.outcome, e.reason = schemas.AuditPermission, "prompt_rejected", schemas.OutcomeDenied, p.Reason
		e.int("findings", int64(len(p.Findings)))
		e.text("patterns", strings.Join(pats, ","))
	case schemas.TypeHookDecision:
		p, err := payloadOf[schemas.HookDecision](t, Audit, ev)
		if p == nil || p.Action != "block" {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason, e.agent = schemas.AuditPermission, "hook_block", p.Tool, schemas.OutcomeDenied, p.Reason, p.Agent
		e.text("point", p.Point)
		e.text("hook", p.By)
	case schemas.TypeDeadLetter:
		p, err := payloadOf[schemas.DeadLetter](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason = schemas.AuditSession, "dead_letter", p.Subject, schemas.OutcomeError, p.Reason
		if strings.Contains(p.Reason, events.ErrForgedSource.Error()) {
			e.category, e.outcome = schemas.AuditPermission, schemas.OutcomeDenied
		}
		e.text("consumer", p.Consumer)
		e.uint("stream_seq", p.StreamSeq)
		e.int("deliveries", int64(p.Deliveries))
	case schemas.TypeToolCall:
		p, err := payloadOf[schemas.ToolCall](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target = schemas.AuditProcess, p.Tool, schemas.ToolTarget(p.Args)
		if _, ok := fileTools[p.Tool]; ok {
			e.category = schemas.AuditFile
		}
		e.text("call", p.CallID)
		if p.DAGID != "" {
			e.path("node", p.DAGID, p.NodeID)
		}
	case schemas.TypeLLMUsage:
		p, err := payloadOf[schemas.LLMUsage](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.agent = schemas.AuditLLM, "call", p.Model, p.Agent
		e.text("call", p.CallID)
		e.int("tokens", int64(p.Usage.TotalTokens))
		e.int("prompt_tokens", int64(p.Usage.PromptTokens))
		e.int("completion_tokens", int64(p.Usage.CompletionTokens))
		if p.CostUSD > 0 {
			e.text("cost_usd", strconv.FormatFloat(p.CostUSD, 'f', -1, 64))
		}
		if p.Provider != "" {
			e.text("provider", p.Provider)
		}
	case schemas.TypeLLMResponse:
		// A call that succeeded is the llm_usage after it; a failed one has
		// none.
		p, err := payloadOf[schemas.LLMResponse](t, Audit, ev)
		if p == nil || p.Error == "" {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason = schemas.AuditLLM, "call", p.Model, schemas.OutcomeError, p.Error
		e.text("call", p.CallID)
	case schemas.TypeSessionCreate, schemas.TypeSessionComplete, schemas.TypeSessionSuspend, schemas.TypeSessionResume, schemas.TypeSessionFork:
		e.category, e.action = schemas.AuditSession, strings.TrimPrefix(string(env.Type), "session_")
		if env.Type == schemas.TypeSessionFork {
			p, err := payloadOf[schemas.SessionFork](t, Audit, ev)
			if p == nil {
				return false, err
			}
			e.target, e.reason = p.Parent, p.Reason
			e.uint("parent_seq", p.ParentSeq)
		}
	case schemas.TypeSessionFail:
		p, err := payloadOf[schemas.SessionFail](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.outcome, e.reason = schemas.AuditSession, "fail", schemas.OutcomeError, p.Reason
	case schemas.TypeSignal:
		p, err := payloadOf[schemas.Signal](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.reason = schemas.AuditSession, p.Action, p.Scope, p.Reason
	case schemas.TypeDAGExecute:
		p, err := payloadOf[schemas.DAGExecute](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target = schemas.AuditSession, "workflow_start", p.DAG.ID
		e.int("nodes", int64(len(p.DAG.Nodes)))
	case schemas.TypeWorkflowComplete:
		p, err := payloadOf[schemas.WorkflowComplete](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target = schemas.AuditSession, "workflow_complete", p.DAGID
		if p.Outcome != schemas.OutcomeSucceeded {
			e.outcome, e.reason = schemas.OutcomeError, p.Summary
		}
		e.text("outcome", p.Outcome)
		e.int("succeeded", int64(p.Succeeded))
		e.int("failed", int64(p.Failed))
		e.int("skipped", int64(p.Skipped))
	case schemas.TypeTaskFailed:
		p, err := payloadOf[schemas.TaskFailed](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason = schemas.AuditSession, "task_failed", p.DAGID+"/"+p.NodeID, schemas.OutcomeError, p.Error
		e.int("attempt", int64(p.Attempt))
	case schemas.TypePipelineStage:
		p, err := payloadOf[schemas.PipelineStage](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.agent = schemas.AuditSession, "pipeline_stage", p.PipelineID+"/"+p.Stage, p.Agent
		e.int("loop", int64(p.Loop))
	case schemas.TypeAgentRestart:
		p, err := payloadOf[schemas.AgentRestart](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.outcome, e.reason = schemas.AuditSession, "agent_restart", p.Agent, schemas.OutcomeError, p.Reason
	case schemas.TypeScheduleAdd:
		p, err := payloadOf[schemas.ScheduleAdd](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target = schemas.AuditConfig, "schedule_add", p.Name
	case schemas.TypeSchedulePause, schemas.TypeScheduleResume, schemas.TypeScheduleRemove, schemas.TypeScheduleDisable:
		p, err := payloadOf[schemas.ScheduleControl](t, Audit, ev)
		if p == nil {
			return false, err
		}
		e.category, e.action, e.target, e.reason = schemas.AuditConfig, string(env.Type), p.Name, p.Reason
	default:
		return false, nil
	}
	if !schemas.IsAuditCategory(e.category) {
		return false, t.reject(Audit, ev, "audit category %q: use one of %s", e.category, strings.Join(schemas.AuditCategories, ", "))
	}
	return true, nil
}
