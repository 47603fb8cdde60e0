package projections

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// The fold keeps decoded state objects in a write-back cache: an event reads and
// changes objects in memory, and a commit encodes each changed object once and
// writes it in the batch with the cursors. Decoding a DAG costs tens of
// microseconds, so during a rebuild an object is decoded at most once and
// encoded once per batch, however many events touch it.
//
// Invariant: every key apply reads goes through the cache, and a key changed
// since the last commit is always in the cache (dirty entries are never
// evicted). Keys apply only writes (the session log, trace hops, rejections) go
// straight into the batch.
//
// The cache is bounded in bytes, not objects: a rebuild's objects range from a
// session of a few hundred bytes to a DAG of several kilobytes read back, and
// a count let the cache of a 5M-event rebuild hold three times what it held at
// 1M. Each entry carries an estimate of what it holds (see sizer): an object
// that can say so measures itself, another counts as its encoded length when
// read or written. Changed objects count too: when they pass half the budget
// (see overBudget) the fold ends its batch and writes them, so they never
// wait past the bound for a batch to end.

// encoder is an object that writes itself as several keys (a DAG: header and
// nodes). Other objects are stored as JSON under their key.
type encoder interface {
	encode(b *pebble.Batch, k []byte, s *scratch) error
}

// scratch holds the buffers a flush encodes into. A batch copies every key and
// value it is given, so one set of buffers serves every object of a flush:
// growing a fresh buffer per object was a sixth of what a rebuild allocated.
type scratch struct {
	key, val []byte
	json     bytes.Buffer
	enc      *json.Encoder
}

// marshal encodes v exactly as json.Marshal does, into a reused buffer valid
// until the next call.
func (s *scratch) marshal(v any) ([]byte, error) {
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.json)
	}
	s.json.Reset()
	if err := s.enc.Encode(v); err != nil {
		return nil, err
	}
	b := s.json.Bytes()
	return b[:len(b)-1], nil // Encode ends the value with a newline
}

// sizer is an object that says how many bytes of memory it holds. One that
// is not counts as its encoded length (see cache.resize).
type sizer interface{ memBytes() int }

// entryBytes is what an entry costs beside its key and object: the entry
// and its slot in the cache's map.
const entryBytes = 128

// newObjectBytes is what a new object that is no sizer counts for until it
// is first written and measured.
const newObjectBytes = 256

type entry struct {
	key   string
	obj   any // nil: absent
	dirty bool
	// size is what the entry counts for in the cache's bytes: entryBytes, its
	// key and its object's estimate.
	size int
	// transient objects are written once and rarely read again (a call's
	// record): they leave the cache as soon as they are committed.
	transient bool
	// absent: the key is not in Pebble (nor in a flushed batch), so a
	// deletion has nothing to delete. A rebuild's short-lived keys (a tool
	// call waiting for its result) are created and deleted between two
	// flushes: without this each left a tombstone to write, flush and
	// compact away.
	absent bool
	// gone: the entry left the cache (evicted, or the cache was reset). A
	// fold that keeps entries beside the cache (the audit's memo) checks
	// it instead of looking the key up again.
	gone bool
	// filtered: a flush added the key to the cache's key filter (see
	// setFilter), which never forgets one. An object written at every
	// flush (a running session or DAG) was hashed into it again each
	// time: six random writes in its 8 MiB.
	filtered bool
	// probation: the entry came in while the cache was full, at the least
	// recently used end (see cache.put), in batch epoch.
	probation bool
	epoch     uint64
	// prev and next link the entries in the cache's recency order (see
	// lru): a list of its own would be one more object for each of the
	// 200,000 or so a rebuild caches, for the collector to follow.
	prev, next *entry
}

type cache struct {
	// written, during a fold of projections that started empty, knows which
	// keys the fold created (see keyFilter).
	written *keyFilter

	m   map[string]*entry
	lru lru
	// budget bounds bytes, what the entries count for (see entry.size);
	// dirtyBytes is the part of it the dirty entries count for.
	budget, bytes, dirtyBytes int64
	epoch                     uint64 // counts the batches (one evict each)
	ghosts                    ghosts // keys lately evicted on probation
	dirty                     []*entry
	transients                []*entry
	scratch                   scratch
	// audit is the audit fold's memo beside the cache (see auditMemo).
	audit auditMemo
}

// ghostBytes is the object size the ghosts are counted for: a ring of one
// key for every ghostBytes of the budget remembers about half as many keys as
// the cache holds DAGs of a rebuild, as a ring of half its objects did.
const ghostBytes = 4 << 10

func newCache(budget int64) *cache {
	c := &cache{m: make(map[string]*entry), budget: budget, ghosts: newGhosts(int(budget / ghostBytes))}
	c.lru.init()
	return c
}

// full reports whether the entries count for the whole budget.
func (c *cache) full() bool { return c.bytes >= c.budget }

// overBudget reports whether the fold should end its batch here: its changed
// objects count for half the budget (the batch writes them), or the entries
// for an eighth more than the budget (eviction, which runs between batches,
// brings them back under it).
func (c *cache) overBudget() bool {
	return c.heldFull() || c.bytes >= c.budget+c.budget/8
}

// heldFull reports whether the changed objects count for half the budget:
// the fold writes them then, in the batch it ends.
func (c *cache) heldFull() bool { return c.dirtyBytes >= c.budget/2 }

// resize makes n the size of e's object (see entry.size).
func (c *cache) resize(e *entry, n int) {
	size := entryBytes + len(e.key) + n
	d := int64(size - e.size)
	e.size = size
	c.bytes += d
	if e.dirty {
		c.dirtyBytes += d
	}
}

// measure sizes e's object obj, just put: a sizer as it says, a deletion
// as nothing, another object as it was last measured (newObjectBytes if it
// never was).
func (c *cache) measure(e *entry, obj any) {
	switch o := obj.(type) {
	case nil:
		c.resize(e, 0)
	case sizer:
		c.resize(e, o.memBytes())
	default:
		if e.size <= entryBytes+len(e.key) {
			c.resize(e, newObjectBytes)
		}
	}
}

// lru orders the cached entries from the most recently used (the front,
// root.next) to the least (the back, root.prev), in a ring through root.
type lru struct{ root entry }

func (l *lru) init() { l.root.next, l.root.prev = &l.root, &l.root }

// back returns the least recently used entry, nil when there is none.
func (l *lru) back() *entry { return l.before(&l.root) }

// before returns the entry used just more recently than e, nil at the front.
func (l *lru) before(e *entry) *entry {
	if e.prev == &l.root {
		return nil
	}
	return e.prev
}

func (l *lru) insertAfter(e, at *entry) {
	e.prev, e.next = at, at.next
	at.next.prev, at.next = e, e
}

func (l *lru) pushFront(e *entry) { l.insertAfter(e, &l.root) }
func (l *lru) pushBack(e *entry)  { l.insertAfter(e, l.root.prev) }

func (l *lru) remove(e *entry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (l *lru) moveToFront(e *entry) {
	if l.root.next != e {
		l.remove(e)
		l.pushFront(e)
	}
}

func (c *cache) get(k []byte) (*entry, bool) {
	e, ok := c.m[string(k)]
	if ok {
		c.touch(e)
	}
	return e, ok
}

// touch records a use of e: it becomes the most recently used, unless it is
// on probation and came in during this batch (a load and the store that
// follows it are one use).
func (c *cache) touch(e *entry) {
	if e.probation {
		if e.epoch == c.epoch {
			return
		}
		e.probation = false
	}
	c.lru.moveToFront(e)
}

// setFilter makes f (nil: none) the filter of the keys the fold writes.
// Each cached key enters it again when next written: one the last filter
// holds is unknown to f.
func (c *cache) setFilter(f *keyFilter) {
	for _, e := range c.m {
		e.filtered = false
	}
	c.written = f
}

// put records obj at k. A clean nil obj is a key Pebble does not hold.
func (c *cache) put(k []byte, obj any, dirty bool) *entry {
	e, ok := c.m[string(k)]
	if !ok {
		// A clean object mirrors Pebble: clean and nil, the key is absent.
		e = &entry{key: string(k), absent: obj == nil && !dirty}
		if c.full() && !c.ghosts.has(k) {
			// Full: the newcomer is the first to leave, unless used again
			// in a later batch (see touch). A fold whose objects outgrow
			// the cache meets them in turn (a rebuild of 100,000
			// sessions running at once): put at the front, each evicted
			// the object needed next, and the cache never hit.
			e.probation, e.epoch = true, c.epoch
			c.lru.pushBack(e)
		} else {
			c.lru.pushFront(e)
		}
		c.m[e.key] = e
	} else {
		c.touch(e)
	}
	e.obj = obj
	if dirty {
		c.markDirty(e, k, ok)
	}
	c.measure(e, obj)
	return e
}

// putRead records obj, read from n stored bytes, at k: put, clean, sized as
// what it was read from unless it measures itself.
func (c *cache) putRead(k []byte, obj any, n int) *entry {
	e := c.put(k, obj, false)
	if _, ok := obj.(sizer); !ok {
		c.resize(e, n)
	}
	return e
}

// update records obj as the new object of e, a cache entry a load or a put
// returned: put without looking its key up again.
func (c *cache) update(e *entry, obj any) {
	e.obj = obj
	c.markDirty(e, nil, true)
	c.measure(e, obj)
}

// markDirty marks e, the cached object at k, changed; cached tells whether it
// was in the cache before (not created just now).
func (c *cache) markDirty(e *entry, k []byte, cached bool) {
	if e.dirty {
		return
	}
	if !cached && c.written != nil && c.written.absent(k) {
		e.absent = true // stored without a load, and surely new
	}
	e.dirty = true
	c.dirtyBytes += int64(e.size)
	c.dirty = append(c.dirty, e)
}

// flush encodes the dirty objects into b and returns the batch it ends in:
// b, or with split (which may hand over a full batch and return another)
// the last split returned. On error it returns the batch it was writing.
func (c *cache) flush(b *pebble.Batch, split func(*pebble.Batch) (*pebble.Batch, error)) (*pebble.Batch, error) {
	c.audit.spill(c)
	b, err := c.audit.posts.write(b, split, &c.scratch, c.written)
	if err != nil {
		return b, err
	}
	for _, e := range c.dirty {
		// A key enters the filter when it is written, not when it turns
		// dirty: a short-lived key (a tool call waiting for its result) is
		// created and deleted between two flushes, and hashing it into the
		// filter was a quarter of the audit projection's fold. Until it is
		// written the key is dirty, so in the cache, and no load asks the
		// filter about it.
		if e.obj != nil && c.written != nil && !e.filtered {
			c.written.add(e.key)
			e.filtered = true
		}
		if split != nil {
			if b, err = split(b); err != nil {
				return b, err
			}
		}
		n := b.Len()
		if err := c.encode(b, e); err != nil {
			return b, err
		}
		e.absent = e.obj == nil
		if _, ok := e.obj.(sizer); !ok && e.obj != nil {
			c.resize(e, b.Len()-n)
		}
	}
	return b, nil
}

// encode writes one object (or its deletion) into b. A deletion of a key the
// store does not hold (created and removed between two flushes) writes
// nothing.
func (c *cache) encode(b *pebble.Batch, e *entry) error {
	k := []byte(e.key)
	switch o := e.obj.(type) {
	case nil:
		if e.absent {
			return nil
		}
		return b.Delete(k, nil)
	case encoder:
		return o.encode(b, k, &c.scratch)
	default:
		v, err := c.scratch.marshal(o)
		if err != nil {
			return fmt.Errorf("encode %q: %w", e.key, err)
		}
		return b.Set(k, v, nil)
	}
}

// markClean marks the flushed objects clean: their values are in a batch.
// The list forgets them too: its array, kept for the next batch, held every
// object a flush wrote (evicted or not) until a later flush wrote as many,
// up to one DAG a session in a rebuild of 100,000 at once.
func (c *cache) markClean() {
	for _, e := range c.dirty {
		e.dirty = false
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.dirtyBytes = 0
}

// evict drops the least recently used clean objects above the budget. Call it
// only when every flushed batch is committed, so an evicted key reads back its
// latest value.
func (c *cache) evict() {
	c.epoch++
	// A transient object still dirty (a catch-up holds changed objects for
	// many batches) waits for the commit that writes it: forgotten here, it
	// stayed in the cache for good, one call record per session.
	held := c.transients[:0]
	for _, e := range c.transients {
		switch {
		case c.m[e.key] != e:
		case e.dirty && (e.obj != nil || !e.absent):
			// (One deleted before it was ever written, as a rebuild's tool
			// calls mostly are, has nothing to write: it leaves now, not
			// hundreds of thousands of events later with the objects held.)
			held = append(held, e)
		default:
			c.drop(e)
		}
	}
	clear(c.transients[len(held):])
	c.transients = held
	for e := c.lru.back(); e != nil && c.bytes > c.budget; {
		prev := c.lru.before(e)
		if !e.dirty {
			c.drop(e)
		}
		e = prev
	}
	c.audit.posts.forget()
}

// drop removes e from the cache.
func (c *cache) drop(e *entry) {
	c.lru.remove(e)
	delete(c.m, e.key)
	e.gone = true
	c.bytes -= int64(e.size)
	if e.dirty {
		c.dirtyBytes -= int64(e.size)
	}
	if e.probation {
		c.ghosts.add(e.key)
	}
}

// ghosts remembers the last keys evicted on probation (their hashes, in a
// ring): one loaded again soon after is in use and enters the cache at the
// front (2Q's "A1out"). A key met again only after more evictions than the
// ring holds (a fold turning over more objects than the cache holds) stays
// on probation, and the objects already cached keep their places.
type ghosts struct {
	seed  maphash.Seed
	ring  []uint64
	next  int
	count map[uint64]int32
}

func newGhosts(n int) ghosts {
	return ghosts{seed: maphash.MakeSeed(), ring: make([]uint64, max(n, 1)), count: make(map[uint64]int32)}
}

func (g *ghosts) has(k []byte) bool { return g.count[maphash.Bytes(g.seed, k)] > 0 }

func (g *ghosts) add(k string) {
	h := maphash.String(g.seed, k)
	if old := g.ring[g.next]; g.count[old] > 0 {
		if g.count[old]--; g.count[old] == 0 {
			delete(g.count, old)
		}
	}
	g.ring[g.next] = h
	g.count[h]++
	g.next = (g.next + 1) % len(g.ring)
}

func (g *ghosts) reset() {
	clear(g.ring)
	clear(g.count)
}

// putTransient records a new transient object (see entry.transient) and
// returns its cache entry.
func (c *cache) putTransient(k []byte, obj any) *entry {
	e := c.put(k, obj, true)
	if !e.transient {
		e.transient = true
		c.transients = append(c.transients, e)
	}
	return e
}

// reset forgets everything, dirty objects included (after a failed commit, or
// when projections are dropped).
func (c *cache) reset() {
	for _, e := range c.m {
		e.gone, e.prev, e.next = true, nil, nil
	}
	clear(c.m)
	c.bytes, c.dirtyBytes = 0, 0
	c.lru.init()
	c.ghosts.reset()
	clear(c.dirty)
	clear(c.transients)
	c.dirty, c.transients = c.dirty[:0], c.transients[:0]
	c.audit.reset()
}

// tx is the state one batch of events is applied to.
type tx struct {
	db    pebble.Reader
	batch *pebble.Batch
	cache *cache
	calls *callKeys // the store's (see callKeys)
	kbuf  []byte
	vbuf  []byte
}

// knownAbsent reports whether k surely does not exist, without reading.
func (t *tx) knownAbsent(k []byte) bool {
	return t.cache.written != nil && t.cache.written.absent(k)
}

// missing records in the cache that k holds nothing, so the next load does
// not look it up again, unless the key filter knows it already: it answers
// again at no cost, and an entry would take a place in the cache. A rebuild
// looks up such keys for every session at nearly every event (a plan mode or
// a tool loadout the session never had), and their entries made the
// sessions' live objects overflow the cache, which then missed at every
// read of one.
func (t *tx) missing(k []byte) {
	if !t.knownAbsent(k) {
		t.cache.put(k, nil, false)
	}
}

// getRaw reads a committed value, copied; nil when absent.
func (t *tx) getRaw(k []byte) ([]byte, error) {
	if t.knownAbsent(k) {
		return nil, nil
	}
	v, closer, err := t.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	return out, closer.Close()
}

// load returns the object stored at k (as JSON) as a *T, or nil when there
// is none.
func load[T any](t *tx, k []byte) (*T, error) { return loadWith(t, k, decodeJSON[T]) }

// loadWith is load of an object that decode reads.
func loadWith[T any](t *tx, k []byte, decode func([]byte) (*T, error)) (*T, error) {
	if e, ok := t.cache.get(k); ok {
		if e.obj == nil {
			return nil, nil
		}
		return e.obj.(*T), nil
	}
	raw, err := t.getRaw(k)
	if err != nil {
		return nil, err
	}
	return loadedWith(t, k, raw, decode)
}

// loadedWith caches raw, what Pebble holds at k (nil: nothing), as the *T
// decode reads, and returns it.
func loadedWith[T any](t *tx, k, raw []byte, decode func([]byte) (*T, error)) (*T, error) {
	if raw == nil {
		t.missing(k)
		return nil, nil
	}
	v, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("decode %q: %w", k, err)
	}
	t.cache.putRead(k, v, len(raw))
	return v, nil
}

func decodeJSON[T any](raw []byte) (*T, error) {
	v := new(T)
	return v, json.Unmarshal(raw, v)
}

// store records v (nil: a deletion) as the new object at k.
func store[T any](t *tx, k []byte, v *T) {
	if v == nil {
		t.cache.put(k, nil, true)
		return
	}
	t.cache.put(k, v, true)
}

// set writes a key apply never reads back.
func (t *tx) set(k, v []byte) error { return t.batch.Set(k, v, nil) }

// setSeqKey writes prefix + id + sep + seq (big-endian) = v, building the key
// in a reused buffer: the session log and traces write one per event.
func (t *tx) setSeqKey(prefix, id string, seq uint64, v []byte) error {
	k := append(t.kbuf[:0], prefix...)
	k = append(k, id...)
	k = append(k, sep)
	k = binary.BigEndian.AppendUint64(k, seq)
	t.kbuf = k
	return t.batch.Set(k, v, nil)
}

// keyFilter is a bloom filter of the keys a fold has stored into projections
// that were empty when it started. A key of such a projection that the filter
// has never seen does not exist, so the fold skips reading it: a rebuild
// creates millions of keys and would otherwise look each one up first. A false
// positive only costs a read.
type keyFilter struct {
	bits     []uint64
	seed     maphash.Seed
	prefixes [][]byte // of the projections that started empty
}

// keyFilterBits sizes the filter: 8 MiB, a false positive rate below 1e-6
// for a million keys and about 4% for ten million.
const (
	keyFilterBits   = 1 << 26
	keyFilterHashes = 6
)

func newKeyFilter(fresh [][]byte) *keyFilter {
	return &keyFilter{bits: make([]uint64, keyFilterBits/64), seed: maphash.MakeSeed(), prefixes: fresh}
}

func (f *keyFilter) positions(h uint64, fn func(i uint64) bool) bool {
	return bloomPositions(h, keyFilterBits, keyFilterHashes, fn)
}

// bloomPositions calls fn with each of the hashes positions of a key whose
// hash is h in a bloom filter of bits bits (a power of two) while fn returns
// true, and reports whether it always did.
func bloomPositions(h, bits, hashes uint64, fn func(i uint64) bool) bool {
	h1, h2 := h, h>>32|1
	for i := range hashes {
		if !fn((h1 + i*h2) & (bits - 1)) {
			return false
		}
	}
	return true
}

// add records k.
func (f *keyFilter) add(k string) {
	f.positions(maphash.String(f.seed, k), func(i uint64) bool {
		f.bits[i/64] |= uint64(1) << (i % 64)
		return true
	})
}

// absent reports whether k surely does not exist.
func (f *keyFilter) absent(k []byte) bool {
	return f.fresh(k) && !f.positions(maphash.Bytes(f.seed, k), func(i uint64) bool { return f.bits[i/64]&(1<<(i%64)) != 0 })
}

// fresh reports whether k belongs to a projection that started empty.
func (f *keyFilter) fresh(k []byte) bool {
	for _, p := range f.prefixes {
		if bytes.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
