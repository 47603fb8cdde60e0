package projections

import "bytes"

// termTable numbers distinct terms in an open-addressing table, their bytes
// kept in its arena: a TermCounter's numbers one text's terms (end to end,
// counts beside it by number), a TermVocab's an update's (separated by
// spaces). Both hold this concrete type rather than share a probe loop
// taking callbacks, so counting, on indexing's hot path, calls nothing
// indirectly.
type termTable struct {
	slots []int32     // 1 + the term's number, 0 for empty
	terms []tableTerm // by number
	arena []byte
}

// tableTerm is one term of a termTable.
type tableTerm struct {
	hash     uint64
	off, end int32 // its bytes in the arena
}

// reset forgets every term, keeping the memory.
func (tt *termTable) reset() {
	clear(tt.slots)
	tt.terms, tt.arena = tt.terms[:0], tt.arena[:0]
}

// ready makes the table's first slots, before a find.
func (tt *termTable) ready() {
	if tt.slots == nil {
		tt.slots = make([]int32, minTermSlots)
	}
}

// find is the number of term key, whose hash is h, or -1 and the slot to
// insert it at (the table made ready). It is small enough to be inlined
// into its callers' loops.
func (tt *termTable) find(h uint64, key []byte) (int32, uint64) {
	mask := uint64(len(tt.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := tt.slots[i]
		if s == 0 {
			return -1, i
		}
		if e := &tt.terms[s-1]; e.hash == h && bytes.Equal(tt.arena[e.off:e.end], key) {
			return s - 1, 0
		}
	}
}

// insert numbers the term that ends the arena from off, whose hash is h,
// at the slot find gave for it.
func (tt *termTable) insert(h uint64, off int, slot uint64) int32 {
	n := int32(len(tt.terms))
	tt.terms = append(tt.terms, tableTerm{hash: h, off: int32(off), end: int32(len(tt.arena))})
	tt.slots[slot] = n + 1
	if 2*len(tt.terms) > len(tt.slots) {
		tt.slots = make([]int32, 2*len(tt.slots))
		mask := uint64(len(tt.slots) - 1)
		for k, e := range tt.terms {
			i := e.hash & mask
			for tt.slots[i] != 0 {
				i = (i + 1) & mask
			}
			tt.slots[i] = int32(k) + 1
		}
	}
	return n
}
