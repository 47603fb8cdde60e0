package projections

import (
	"math"
	"strings"
)

// Full-text search: the terms of a text, and BM25 ranking over them. The
// indexer (which extracts the terms an event records) and every query use the
// same Terms, so a query finds what was indexed.

// Term length bounds: shorter words are noise, longer ones are not words.
const (
	minTermLen = 2
	maxTermLen = 64
)

// Terms calls add with each search term of text, in order, repeats included.
// A term is a lower-cased word (a run of letters, digits and underscores, or
// any non-ASCII bytes); a word made of several parts (parseConfigFile,
// max_term_len, HTTPServer) also yields each part, so a search for "config"
// finds parseConfigFile. Words of digits only are left out.
func Terms(text string, add func(term string)) {
	rawTerms(text, func(t string) { add(lower(t)) })
}

// rawTerms calls add with each term of text as it is written: Terms
// lower-cased.
func rawTerms(text string, add func(string)) {
	for i := 0; i < len(text); {
		if !wordByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && wordByte(text[j]) {
			j++
		}
		word(text[i:j], add)
		i = j
	}
}

// TermCounts counts the terms of text.
func TermCounts(text string) map[string]int {
	out := make(map[string]int)
	Terms(text, func(t string) { out[t]++ })
	return out
}

// TermCounter counts the terms of texts as Terms finds them, reusing its
// memory from one text to the next. A text's terms are numbered in a small
// table of their own (an indexer counts a few hundred terms a file; one map
// of every term ever met grew to hundreds of thousands and missed the cache
// at each lookup), their bytes copied once into its arena: a term costs a
// hash and a probe, and no allocation.
type TermCounter struct {
	table  termTable
	counts []termTally // by term number
	onceN  uint32      // the current CountOnce call
}

// termTally is how often one term of the current text was counted.
type termTally struct {
	count int32
	once  uint32 // the CountOnce call that last counted it
}

// Table sizes: the smallest, and the largest a TermCounter keeps from one
// text to the next (a huge file's table is let go).
const (
	minTermSlots  = 256
	keptTermSlots = 1 << 14
)

// Reset forgets what was counted.
func (c *TermCounter) Reset() {
	if len(c.table.slots) > keptTermSlots {
		c.table, c.counts = termTable{}, nil
	}
	c.table.reset()
	c.counts, c.onceN = c.counts[:0], 0
}

// Count counts each term of text, repeats included.
func (c *TermCounter) Count(text string) { c.scan(text, false) }

// CountOnce counts each distinct term of text once.
func (c *TermCounter) CountOnce(text string) {
	c.onceN++
	c.scan(text, true)
}

// scan counts the terms of text (Terms's, without its callback for the
// common word of lower-case letters only, which has no parts).
func (c *TermCounter) scan(text string, once bool) {
	for i := 0; i < len(text); {
		if !wordByte(text[i]) {
			i++
			continue
		}
		j, plain := i, true
		for ; j < len(text); j++ {
			if b := text[j]; b < 'a' || b > 'z' {
				if !wordByte(b) {
					break
				}
				plain = false
			}
		}
		w := text[i:j]
		i = j
		switch {
		case !plain:
			word(w, func(t string) { c.add(t, once) })
		case len(w) >= minTermLen && len(w) <= maxTermLen:
			c.tally(numberOf(c, w), once) // lower-case already
		}
	}
}

// add counts term t (as written).
func (c *TermCounter) add(t string, once bool) { c.tally(c.number(t), once) }

// tally counts the term numbered n.
func (c *TermCounter) tally(n int32, once bool) {
	e := &c.counts[n]
	if once {
		if e.once == c.onceN {
			return
		}
		e.once = c.onceN
	}
	e.count++
}

// number is the number of term t (as written, so lower-cased here) among
// the text's terms, added when it is new. The term is lower-cased on the
// stack (a term is at most maxTermLen bytes) and copied into the arena only
// when it is new.
func (c *TermCounter) number(t string) int32 {
	var buf [maxTermLen]byte
	key := buf[:len(t)]
	for i := 0; i < len(t); i++ {
		b := t[i]
		if b >= 0x80 {
			key = []byte(lower(t)) // Unicode case rules
			break
		}
		if isUpper(b) {
			b += 'a' - 'A'
		}
		key[i] = b
	}
	return numberOf(c, key)
}

// numberOf is the number of key (lower-cased) among c's text's terms,
// added when it is new: its bytes are copied into the arena then.
func numberOf[K string | []byte](c *TermCounter, key K) int32 {
	tt := &c.table
	h := termHash(key)
	tt.ready()
	n, slot := findTerm(tt, h, key)
	if n >= 0 {
		return n
	}
	off := len(tt.arena)
	tt.arena = append(tt.arena, key...)
	c.counts = append(c.counts, termTally{})
	return tt.insert(h, off, slot)
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// word adds w and, when it has several, its parts.
func word(w string, add func(string)) {
	if len(w) < minTermLen || len(w) > maxTermLen || digitsOnly(w) {
		return
	}
	add(w)
	start, parts := 0, 0
	emit := func(end int) {
		if end > start {
			p := strings.Trim(w[start:end], "_")
			if len(p) >= minTermLen && len(p) < len(w) && !digitsOnly(p) {
				add(p)
			}
			parts++
		}
		start = end
	}
	for k := 1; k < len(w); k++ {
		a, b := w[k-1], w[k]
		switch {
		case b == '_':
			emit(k)
		case a == '_':
			start = k
		case isLower(a) && isUpper(b), isDigit(a) != isDigit(b):
			emit(k)
		case isUpper(a) && isUpper(b) && k+1 < len(w) && isLower(w[k+1]):
			emit(k) // HTTPServer: HTTP | Server
		}
	}
	if parts > 0 {
		emit(len(w))
	}
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// lower is strings.ToLower without the allocation for words already in
// lower case (most of them).
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if isUpper(s[i]) || s[i] >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}

// BM25 parameters: the usual k1 and b.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// bm25 scores one term of a document: tf occurrences in a document of dl
// terms, the term in df of n documents whose mean length is avgdl.
func bm25(tf, dl, df, n int, avgdl float64) float64 {
	if tf == 0 || df == 0 || n == 0 {
		return 0
	}
	idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
	if avgdl <= 0 {
		avgdl = 1
	}
	f := float64(tf)
	return idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(dl)/avgdl))
}
