package projections

import (
	"bytes"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// A projection's cursor is stored under cursorKey either as its sequence or,
// when it is the head's (meta/head, written with every batch), as
// followsHead: a live projector commits a batch per event or two, and
// writing every projection's cursor in each was most of what it inserted
// into Pebble's memtable (whose size then slowed every read). A cursor
// that stops following the head (a projection held behind it, or the head
// of a rebuild of one projection that is behind the others) is written as
// its number in the same batch, once.
var followsHead = []byte("head")

// cursorLayout is part of every stored projection version: a binary from
// before cursors could follow the head would read followsHead as 0 and fold
// the whole stream again onto the state, so to it the version differs and
// it rebuilds. A store written before is read as it is (its cursors are
// all numbers); Open marks its versions with the layout.
const cursorLayout = "cursors-follow-head"

// storedVersion is what versionKey holds for p.
func (p *projection) storedVersion() string { return strconv.Itoa(p.version) + "/" + cursorLayout }

// readCursors reads every projection's cursor from r and which of them
// follow the head.
func readCursors(r pebble.Reader) (cursors map[string]uint64, follows map[string]bool, err error) {
	head, err := getFrom(r, headKey)
	if err != nil {
		return nil, nil, err
	}
	seq, _ := decodeHead(head)
	cursors, follows = map[string]uint64{}, map[string]bool{}
	for _, p := range projectionList {
		v, err := getFrom(r, cursorKey(p.name))
		if err != nil {
			return nil, nil, err
		}
		if bytes.Equal(v, followsHead) {
			cursors[p.name], follows[p.name] = seq, true
			continue
		}
		cursors[p.name] = getUint64(v)
	}
	return cursors, follows, nil
}

// writeCursors adds to b, which moves the head to head, the cursors whose
// stored form changes: followsHead for those at the head that did not
// follow it, the number of those that stopped following it or moved
// elsewhere (in moved). follows is updated; the changes are returned for
// the store, told once b is committed.
func writeCursors(b *pebble.Batch, head uint64, cursors map[string]uint64, moved map[string]uint64, follows map[string]bool) (map[string]bool, error) {
	var changed map[string]bool
	for _, p := range projectionList {
		c := cursors[p.name]
		follow := c == head
		_, m := moved[p.name]
		var v []byte
		switch {
		case follow && follows[p.name]:
			continue // moves with the head
		case follow:
			v = followsHead
		case !m && !follows[p.name]:
			continue // its number, unchanged
		default:
			v = putUint64(c)
		}
		if err := b.Set(cursorKey(p.name), v, nil); err != nil {
			return nil, err
		}
		if changed == nil {
			changed = map[string]bool{}
		}
		follows[p.name], changed[p.name] = follow, follow
	}
	return changed, nil
}
