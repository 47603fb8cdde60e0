package projections

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"

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

// encoder is an object that writes itself as several keys (a DAG: header and
// nodes). Other objects are stored as JSON under their key.
type encoder interface {
	encode(b *pebble.Batch, k []byte) error
}

type entry struct {
	key   string
	obj   any // nil: absent
	dirty bool
	elem  *list.Element
}

type cache struct {
	m     map[string]*entry
	lru   list.List // front: most recently used
	cap   int
	dirty []*entry
}

func newCache(capacity int) *cache {
	return &cache{m: make(map[string]*entry), cap: capacity}
}

func (c *cache) get(k []byte) (*entry, bool) {
	e, ok := c.m[string(k)]
	if ok {
		c.lru.MoveToFront(e.elem)
	}
	return e, ok
}

func (c *cache) put(k []byte, obj any, dirty bool) *entry {
	e, ok := c.m[string(k)]
	if !ok {
		e = &entry{key: string(k)}
		e.elem = c.lru.PushFront(e)
		c.m[e.key] = e
	} else {
		c.lru.MoveToFront(e.elem)
	}
	e.obj = obj
	if dirty && !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, e)
	}
	return e
}

func (c *cache) markDirty(e *entry) {
	if !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, e)
	}
}

// flush encodes the dirty objects into b.
func (c *cache) flush(b *pebble.Batch) error {
	for _, e := range c.dirty {
		k := []byte(e.key)
		switch o := e.obj.(type) {
		case nil:
			if err := b.Delete(k, nil); err != nil {
				return err
			}
		case encoder:
			if err := o.encode(b, k); err != nil {
				return err
			}
		default:
			v, err := json.Marshal(o)
			if err != nil {
				return fmt.Errorf("encode %q: %w", e.key, err)
			}
			if err := b.Set(k, v, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// committed marks the flushed objects clean and evicts the least recently used
// clean ones above capacity.
func (c *cache) committed() {
	for _, e := range c.dirty {
		e.dirty = false
	}
	c.dirty = c.dirty[:0]
	for el := c.lru.Back(); el != nil && len(c.m) > c.cap; {
		prev := el.Prev()
		e := el.Value.(*entry)
		if !e.dirty {
			c.lru.Remove(el)
			delete(c.m, e.key)
		}
		el = prev
	}
}

// reset forgets everything, dirty objects included (after a failed commit, or
// when projections are dropped).
func (c *cache) reset() {
	clear(c.m)
	c.lru.Init()
	c.dirty = c.dirty[:0]
}

// tx is the state one batch of events is applied to.
type tx struct {
	db    pebble.Reader
	batch *pebble.Batch
	cache *cache
}

// getRaw reads a committed value, copied; nil when absent.
func (t *tx) getRaw(k []byte) ([]byte, error) {
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

// load returns the object stored at k as a *T, or nil when there is none.
func load[T any](t *tx, k []byte) (*T, error) {
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
	if raw == nil {
		t.cache.put(k, nil, false)
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("decode %q: %w", k, err)
	}
	t.cache.put(k, v, false)
	return v, nil
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
