package projections

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/sylk/sylk/schemas"
)

// A code file's record is binary: a fold writes one per indexed file, and
// as JSON they were a third of the bytes an index of a tree put into
// Pebble (its field names repeated in every symbol and call), and reading
// them back by reflection the most of what a health report or a symbol
// lookup costs.
//
// The record is the format byte, then the numbers and strings of the file
// in a fixed order: a string is its length (uvarint) and its bytes, a
// signed number a varint, a list its length (uvarint) and its items.
// TestCodeFileCodecRoundTrips keeps the two directions in step.

// codeFileFormat is the record's first byte.
const codeFileFormat = 1

const (
	codeFileTest = 1 << iota
	codeFileStubbed
)

func (f *CodeFile) encode(b *pebble.Batch, k []byte, s *scratch) error {
	s.val = appendCodeFile(s.val[:0], f)
	return b.Set(k, s.val, nil)
}

func appendCodeFile(b []byte, f *CodeFile) []byte {
	b = append(b, codeFileFormat)
	b = binary.AppendUvarint(b, f.Seq)
	var flags byte
	if f.Test {
		flags |= codeFileTest
	}
	if f.Stubbed {
		flags |= codeFileStubbed
	}
	b = append(b, flags)
	for _, n := range [...]int64{f.Size, int64(f.Lines), int64(f.Debt), int64(f.Redactions), int64(f.Length)} {
		b = binary.AppendVarint(b, n)
	}
	for _, s := range [...]string{f.Path, f.Hash, f.Lang, f.Package, f.Terms, f.EmbedHash, f.ParseError} {
		b = appendCodeString(b, s)
	}
	b = appendCodeString(b, string(f.TermRefs))
	b = binary.AppendUvarint(b, uint64(len(f.Imports)))
	for _, imp := range f.Imports {
		b = appendCodeString(b, imp)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Symbols)))
	for i := range f.Symbols {
		s := &f.Symbols[i]
		for _, v := range [...]string{s.Name, s.Kind, s.Recv, s.Signature} {
			b = appendCodeString(b, v)
		}
		b = binary.AppendVarint(b, int64(s.Line))
		b = binary.AppendVarint(b, int64(s.EndLine))
		doc := byte(0)
		if s.Doc {
			doc = 1
		}
		b = append(b, doc)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Calls)))
	for i := range f.Calls {
		c := &f.Calls[i]
		b = appendCodeString(b, c.From)
		b = appendCodeString(b, c.To)
		b = binary.AppendVarint(b, int64(c.Line))
	}
	return b
}

func appendCodeString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// errCodeFile: a record that does not read as appendCodeFile writes them.
var errCodeFile = errors.New("malformed code file record")

// decodeCodeFile reads what appendCodeFile wrote. Every string of the file
// is cut from one copy of v.
func decodeCodeFile(v []byte) (*CodeFile, error) {
	if len(v) == 0 || v[0] != codeFileFormat {
		return nil, fmt.Errorf("%w: format %q", errCodeFile, v[:min(len(v), 1)])
	}
	d := codeFileReader{b: v, s: string(v), off: 1}
	f := &CodeFile{Seq: d.uvarint()}
	flags := d.byte()
	f.Test, f.Stubbed = flags&codeFileTest != 0, flags&codeFileStubbed != 0
	f.Size = d.varint()
	f.Lines, f.Debt, f.Redactions, f.Length = int(d.varint()), int(d.varint()), int(d.varint()), int(d.varint())
	for _, s := range [...]*string{&f.Path, &f.Hash, &f.Lang, &f.Package, &f.Terms, &f.EmbedHash, &f.ParseError} {
		*s = d.str()
	}
	if refs := d.str(); refs != "" {
		f.TermRefs = []byte(refs)
	}
	if n := d.count(1); n > 0 {
		f.Imports = make([]string, n)
		for i := range f.Imports {
			f.Imports[i] = d.str()
		}
	}
	if n := d.count(7); n > 0 {
		f.Symbols = make([]schemas.Symbol, n)
		for i := range f.Symbols {
			s := &f.Symbols[i]
			s.Name, s.Kind, s.Recv, s.Signature = d.str(), d.str(), d.str(), d.str()
			s.Line, s.EndLine = int(d.varint()), int(d.varint())
			s.Doc = d.byte() != 0
		}
	}
	if n := d.count(3); n > 0 {
		f.Calls = make([]schemas.Call, n)
		for i := range f.Calls {
			c := &f.Calls[i]
			c.From, c.To, c.Line = d.str(), d.str(), int(d.varint())
		}
	}
	if d.err == nil && d.off != len(d.s) {
		d.err = fmt.Errorf("%w: %d bytes left over", errCodeFile, len(d.s)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return f, nil
}

// codeFileReader reads a record, b, from off on: its numbers from b, its
// strings cut from s, b's copy. Its first error stops it (every later read
// returns zero).
type codeFileReader struct {
	b   []byte
	s   string
	off int
	err error
}

func (d *codeFileReader) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", errCodeFile, what, d.off)
	}
	d.off = len(d.s)
}

func (d *codeFileReader) byte() byte {
	if d.off >= len(d.s) {
		d.fail("short")
		return 0
	}
	d.off++
	return d.s[d.off-1]
}

func (d *codeFileReader) uvarint() uint64 {
	x, n := binary.Uvarint(d.b[d.off:])
	return d.number(x, n, "bad uvarint")
}

func (d *codeFileReader) varint() int64 {
	x, n := binary.Varint(d.b[d.off:])
	return int64(d.number(uint64(x), n, "bad varint"))
}

// number moves past a varint of n bytes (0 or less: none could be read,
// what fails) and returns x, its value.
func (d *codeFileReader) number(x uint64, n int, what string) uint64 {
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.off += n
	return x
}

func (d *codeFileReader) str() string {
	n := d.uvarint()
	if n > uint64(len(d.s)-d.off) {
		d.fail("string past the end")
		return ""
	}
	s := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

// count reads a list's length, each of whose items takes at least least
// bytes: a length the rest of the record cannot hold is an error, not an
// allocation.
func (d *codeFileReader) count(least int) int {
	n := d.uvarint()
	if n > uint64((len(d.s)-d.off)/least) {
		d.fail("list longer than the record")
		return 0
	}
	return int(n)
}
