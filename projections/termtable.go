package projections

import (
	"math/bits"
	"math/rand/v2"
)

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

// findTerm is the number in tt of term key, whose hash is h, or -1 and
// the slot to insert it at (the table made ready). It is small enough to
// be inlined into its callers' loops.
func findTerm[K string | []byte](tt *termTable, h uint64, key K) (int32, uint64) {
	mask := uint64(len(tt.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := tt.slots[i]
		if s == 0 {
			return -1, i
		}
		if e := &tt.terms[s-1]; e.hash == h && string(tt.arena[e.off:e.end]) == string(key) {
			return s - 1, 0
		}
	}
}

// insert numbers the term that ends the arena from off, whose hash is h,
// at the slot findTerm gave for it.
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

// termSeeds seed termHash for every TermCounter and TermVocab of the
// process, so a vocabulary takes a counter's hashes as they are; random,
// so no text can be written to collide in every process.
var termSeeds = [2]uint64{rand.Uint64(), rand.Uint64()}

// termHash hashes a term for a termTable: wyhash's mixing (a 128-bit
// product folded in half), a word of 8 bytes at a time. A term is a few
// bytes: maphash.Bytes's calls around its hashing were a quarter of
// counting a file's terms.
func termHash[K string | []byte](key K) uint64 {
	h := termSeeds[0] ^ uint64(len(key))
	for len(key) > 8 {
		w := uint64(key[0]) | uint64(key[1])<<8 | uint64(key[2])<<16 | uint64(key[3])<<24 |
			uint64(key[4])<<32 | uint64(key[5])<<40 | uint64(key[6])<<48 | uint64(key[7])<<56
		h = mum(w^termSeeds[1], h^0x8bb84b93962eacc9)
		key = key[8:]
	}
	var w uint64
	for i := len(key) - 1; i >= 0; i-- {
		w = w<<8 | uint64(key[i])
	}
	return mum(w^termSeeds[1], h)
}

// mum is the 128-bit product of a and b, its halves xored.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
