package projections

import "encoding/binary"

// CountedTerms is what a TermCounter counted of one text, taken out of it
// (CountedInto) so the counter can go on to the next text.
type CountedTerms struct {
	terms  []tableTerm
	counts []termTally
	arena  []byte
}

// CountedBuffer holds the CountedTerms of many texts end to end. An
// indexer counts the terms of every file and hands them to the batcher that
// numbers them in its update's vocabulary: a copy of three slices per file
// was a third of what it allocated. Copied into a buffer that is reused
// once the batcher is done with its files, they cost no allocation.
type CountedBuffer struct {
	terms  []tableTerm
	counts []termTally
	arena  []byte
}

// Reset empties b, keeping its memory. The CountedTerms taken into it
// must not be used any more.
func (b *CountedBuffer) Reset() {
	b.terms, b.counts, b.arena = b.terms[:0], b.counts[:0], b.arena[:0]
}

// CountedInto appends a copy of the counts to b (in the order the terms
// were first met) and returns it; it is valid until b is Reset.
func (c *TermCounter) CountedInto(b *CountedBuffer) CountedTerms {
	t, a := len(b.terms), len(b.arena)
	b.terms = append(b.terms, c.table.terms...)
	b.counts = append(b.counts, c.counts...)
	b.arena = append(b.arena, c.table.arena...)
	return CountedTerms{terms: b.terms[t:len(b.terms):len(b.terms)], counts: b.counts[t:len(b.counts):len(b.counts)], arena: b.arena[a:len(b.arena):len(b.arena)]}
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
	table termTable
}

// Reset forgets every term.
func (v *TermVocab) Reset() { v.table.reset() }

// AppendRefs appends to dst the references of ct's terms (in
// schemas.IndexedFile.TermRefs's format: each term's number and count,
// uvarints), numbering the terms the vocabulary has not met.
func (v *TermVocab) AppendRefs(dst []byte, ct CountedTerms) []byte {
	tt := &v.table
	tt.ready()
	for i, e := range ct.terms {
		t := ct.arena[e.off:e.end]
		n, slot := findTerm(tt, e.hash, t)
		if n < 0 {
			if len(tt.terms) > 0 {
				tt.arena = append(tt.arena, ' ')
			}
			off := len(tt.arena)
			tt.arena = append(tt.arena, t...)
			n = tt.insert(e.hash, off, slot)
		}
		dst = binary.AppendUvarint(dst, uint64(n))
		dst = binary.AppendUvarint(dst, uint64(ct.counts[i].count))
	}
	return dst
}

// Len is the number of terms.
func (v *TermVocab) Len() int { return len(v.table.terms) }

// String is the terms, in the order of their numbers, separated by spaces
// (schemas.IndexUpdate.Vocab): the arena as it is.
func (v *TermVocab) String() string { return string(v.table.arena) }
