package projections

import (
	"bytes"
	"encoding/binary"
	"slices"
)

// CountedTerms is what a TermCounter counted of one text, taken out of it
// (Counted) so the counter can go on to the next text.
type CountedTerms struct {
	terms []countedTerm
	arena []byte
}

// Counted is a copy of the counts, in the order the terms were first met.
func (c *TermCounter) Counted() CountedTerms {
	return CountedTerms{terms: slices.Clone(c.terms), arena: slices.Clone(c.arena)}
}

// Len is the number of distinct terms.
func (ct CountedTerms) Len() int { return len(ct.terms) }

// Bytes is about how many bytes the terms take as a TermVocab's
// references: a few per term, and each term once in the vocabulary.
func (ct CountedTerms) Bytes() int { return 3*len(ct.terms) + len(ct.arena)/4 }

// TermVocab numbers the distinct terms of many texts' CountedTerms (an
// index_update's vocabulary), so that each text's terms are references
// into it: a term's bytes are written once an event, and a fold files a
// posting by its number, not by hashing its term again.
type TermVocab struct {
	slots []int32 // open addressing: 1 + the term's number, 0 for empty
	terms []vocabTerm
	words []byte // the terms, separated by spaces (schemas.IndexUpdate.Vocab)
}

type vocabTerm struct {
	hash     uint64
	off, end int32 // its bytes in words
}

// Reset forgets every term.
func (v *TermVocab) Reset() {
	clear(v.slots)
	v.terms, v.words = v.terms[:0], v.words[:0]
}

// AppendRefs appends to dst the references of ct's terms (in
// schemas.IndexedFile.TermRefs's format: each term's number and count,
// uvarints), numbering the terms the vocabulary has not met.
func (v *TermVocab) AppendRefs(dst []byte, ct CountedTerms) []byte {
	for _, e := range ct.terms {
		dst = binary.AppendUvarint(dst, uint64(v.number(e.hash, ct.arena[e.off:e.end])))
		dst = binary.AppendUvarint(dst, uint64(e.count))
	}
	return dst
}

// number is the number of term t, whose hash is h.
func (v *TermVocab) number(h uint64, t []byte) int32 {
	if v.slots == nil {
		v.slots = make([]int32, 1024)
	}
	mask := uint64(len(v.slots) - 1)
	i := h & mask
	for ; v.slots[i] != 0; i = (i + 1) & mask {
		if e := &v.terms[v.slots[i]-1]; e.hash == h && bytes.Equal(v.words[e.off:e.end], t) {
			return v.slots[i] - 1
		}
	}
	id := int32(len(v.terms))
	if id > 0 {
		v.words = append(v.words, ' ')
	}
	off := int32(len(v.words))
	v.words = append(v.words, t...)
	v.terms = append(v.terms, vocabTerm{hash: h, off: off, end: int32(len(v.words))})
	v.slots[i] = id + 1
	if 2*len(v.terms) > len(v.slots) {
		v.slots = make([]int32, 2*len(v.slots))
		mask = uint64(len(v.slots) - 1)
		for k, e := range v.terms {
			j := e.hash & mask
			for v.slots[j] != 0 {
				j = (j + 1) & mask
			}
			v.slots[j] = int32(k) + 1
		}
	}
	return id
}

// Len is the number of terms.
func (v *TermVocab) Len() int { return len(v.terms) }

// String is the terms, in the order of their numbers, separated by spaces
// (schemas.IndexUpdate.Vocab).
func (v *TermVocab) String() string { return string(v.words) }
