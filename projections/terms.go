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

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// word adds w and, when it has several, its parts.
func word(w string, add func(string)) {
	if len(w) < minTermLen || len(w) > maxTermLen || digitsOnly(w) {
		return
	}
	add(lower(w))
	start, parts := 0, 0
	emit := func(end int) {
		if end > start {
			p := strings.Trim(w[start:end], "_")
			if len(p) >= minTermLen && len(p) < len(w) && !digitsOnly(p) {
				add(lower(p))
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
