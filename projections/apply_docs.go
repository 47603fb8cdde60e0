package projections

import (
	"encoding/binary"
	"path"
	"slices"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// The documents projection: the Academic's doc_update events folded into
// a full-text index of the chunks (BM25), each chunk's text for citations,
// and each chunk's embed hash for the vector side of a search. A document
// ingested again replaces every key of its previous version; a document
// removed or skipped loses them all.

// DocRecord is one ingested document as the projection keeps it: what the
// event said of it but the chunks' text (kept apart, see docChunkKey).
type DocRecord struct {
	Path       string        `json:"path"`
	Hash       string        `json:"hash"`
	Size       int64         `json:"size"`
	Format     string        `json:"format"`
	Title      string        `json:"title,omitempty"`
	Redactions int           `json:"redactions,omitempty"`
	Seq        uint64        `json:"seq"`
	Chunks     []DocChunkRec `json:"chunks"`
}

// DocChunkRec is a chunk of a DocRecord.
type DocChunkRec struct {
	Section   string `json:"section"`
	Hash      string `json:"hash"`
	EmbedHash string `json:"embed_hash"`
	// Length is the number of terms with repeats; Terms are the distinct
	// terms (their postings are deleted with the chunk).
	Length int      `json:"length"`
	Terms  []string `json:"terms,omitempty"`
}

// docTotals are what BM25 needs of the whole corpus, and the last update.
type docTotals struct {
	Docs   int    `json:"docs"`
	Chunks int    `json:"chunks"`
	Length int64  `json:"length"`
	Seq    uint64 `json:"seq"`
}

// DocID names a document in the projection's keys: RootID of its path.
func DocID(p string) string { return RootID(p) }

func applyDocs(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.Type != schemas.TypeDocUpdate {
		return nil
	}
	p, err := payloadOf[schemas.DocUpdate](t, Docs, ev)
	if p == nil {
		return err
	}
	if reason := checkDocUpdate(p); reason != "" {
		return t.reject(Docs, ev, "%s", reason)
	}
	tot, err := load[docTotals](t, docTotalsKey())
	if err != nil {
		return err
	}
	if tot == nil {
		tot = &docTotals{}
	}
	tot.Seq = ev.seq
	for _, pth := range p.Removed {
		if err := dropDoc(t, pth, tot); err != nil {
			return err
		}
		if err := t.batch.Delete(docSkipKey(DocID(pth)), nil); err != nil {
			return err
		}
	}
	for _, s := range p.Skipped {
		if err := dropDoc(t, s.Path, tot); err != nil {
			return err
		}
		if err := t.set(docSkipKey(DocID(s.Path)), []byte(s.Path+"\n"+s.Reason)); err != nil {
			return err
		}
	}
	for i := range p.Docs {
		d := &p.Docs[i]
		if err := dropDoc(t, d.Path, tot); err != nil {
			return err
		}
		if err := t.batch.Delete(docSkipKey(DocID(d.Path)), nil); err != nil {
			return err
		}
		if err := putDoc(t, d, ev.seq, tot); err != nil {
			return err
		}
	}
	store(t, docTotalsKey(), tot)
	return nil
}

// checkDocUpdate is why p cannot be applied, or "".
func checkDocUpdate(p *schemas.DocUpdate) string {
	seen := map[string]bool{}
	check := func(what, pth string) string {
		switch {
		case !path.IsAbs(pth) || path.Clean(pth) != pth || strings.ContainsRune(pth, 0):
			return what + " path " + quote(pth) + " is not a clean absolute path"
		case seen[pth]:
			return "path " + quote(pth) + " is named twice"
		}
		seen[pth] = true
		return ""
	}
	for _, d := range p.Docs {
		if r := check("document", d.Path); r != "" {
			return r
		}
		if d.Hash == "" {
			return "document " + quote(d.Path) + " has no content hash"
		}
		for _, c := range d.Chunks {
			if c.Hash != schemas.TextHash(c.Text) {
				return "a chunk of " + quote(d.Path) + " (" + quote(c.Section) + ") has a hash that is not its text's"
			}
		}
	}
	for _, r := range p.Removed {
		if why := check("removed", r); why != "" {
			return why
		}
	}
	for _, s := range p.Skipped {
		if why := check("skipped", s.Path); why != "" {
			return why
		}
	}
	return ""
}

// putDoc writes every key of d: its record, its chunks' text, postings and
// embed hashes.
func putDoc(t *tx, d *schemas.Document, seq uint64, tot *docTotals) error {
	did := DocID(d.Path)
	rec := &DocRecord{Path: d.Path, Hash: d.Hash, Size: d.Size, Format: d.Format, Title: d.Title, Redactions: d.Redactions, Seq: seq,
		Chunks: make([]DocChunkRec, len(d.Chunks))}
	for i, c := range d.Chunks {
		counts := TermCounts(d.Title + "\n" + c.Section + "\n" + c.Text)
		cr := DocChunkRec{Section: c.Section, Hash: c.Hash, EmbedHash: c.EmbedHash, Terms: make([]string, 0, len(counts))}
		for term, n := range counts {
			if validTerm(term) {
				cr.Length += n
				cr.Terms = append(cr.Terms, term)
			}
		}
		slices.Sort(cr.Terms) // the record is compared with a rebuild's
		for _, term := range cr.Terms {
			v := binary.AppendUvarint(nil, uint64(counts[term]))
			if err := t.set(docTermKey(term, did, i), binary.AppendUvarint(v, uint64(cr.Length))); err != nil {
				return err
			}
		}
		if err := t.set(docChunkKey(did, i), []byte(c.Text)); err != nil {
			return err
		}
		if c.EmbedHash != "" {
			if err := t.set(docEmbedKey(did, i), []byte(c.EmbedHash)); err != nil {
				return err
			}
		}
		rec.Chunks[i] = cr
		tot.Length += int64(cr.Length)
	}
	tot.Docs++
	tot.Chunks += len(d.Chunks)
	store(t, docKey(did), rec)
	return nil
}

// dropDoc deletes every key of the document at pth, if it is ingested.
func dropDoc(t *tx, pth string, tot *docTotals) error {
	did := DocID(pth)
	old, err := load[DocRecord](t, docKey(did))
	if err != nil || old == nil {
		return err
	}
	b := t.batch
	for i, c := range old.Chunks {
		for _, term := range c.Terms {
			if err := b.Delete(docTermKey(term, did, i), nil); err != nil {
				return err
			}
		}
		tot.Length -= int64(c.Length)
	}
	for _, p := range [][]byte{docChunksPrefix(did), docEmbedsPrefix(did)} {
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	tot.Docs--
	tot.Chunks -= len(old.Chunks)
	store[DocRecord](t, docKey(did), nil)
	return nil
}

// Keys of the documents projection (see the package comment).
func docTotalsKey() []byte              { return []byte("docs/n") }
func docKey(did string) []byte          { return key("docs/d/", did) }
func docsPrefix() []byte                { return []byte("docs/d/") }
func docSkipKey(did string) []byte      { return key("docs/s/", did) }
func docSkipsPrefix() []byte            { return []byte("docs/s/") }
func docChunksPrefix(did string) []byte { return under(key("docs/c/", did)) }
func docChunkKey(did string, i int) []byte {
	return binary.BigEndian.AppendUint32(docChunksPrefix(did), uint32(i))
}
func docEmbedsPrefix(did string) []byte { return under(key("docs/e/", did)) }
func docEmbedsAll() []byte              { return []byte("docs/e/") }
func docEmbedKey(did string, i int) []byte {
	return binary.BigEndian.AppendUint32(docEmbedsPrefix(did), uint32(i))
}
func docTermPrefix(term string) []byte { return under(key("docs/t/", term)) }
func docTermKey(term, did string, i int) []byte {
	return binary.BigEndian.AppendUint32(append(docTermPrefix(term), append([]byte(did), sep)...), uint32(i))
}
