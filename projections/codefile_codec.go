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
	d := codeFileReader{recordReader: recordReader{b: v[1:]}, s: string(v)}
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
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes left over", len(d.b)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v at byte %d", errCodeFile, d.err, len(v)-len(d.b))
	}
	return f, nil
}

// codeFileHash reads only the content hash of a record appendCodeFile
// wrote (what a scan compares a file with): the header before it is a few
// bytes.
func codeFileHash(v []byte) (string, error) {
	if len(v) == 0 || v[0] != codeFileFormat {
		return "", fmt.Errorf("%w: format %q", errCodeFile, v[:min(len(v), 1)])
	}
	d := recordReader{b: v[1:]}
	d.uvarint()
	d.byte()
	for range 5 {
		d.varint()
	}
	d.take(d.uvarint()) // the path
	h := d.take(d.uvarint())
	if d.err != nil {
		return "", fmt.Errorf("%w: %v at byte %d", errCodeFile, d.err, len(v)-len(d.b))
	}
	return string(h), nil
}

// codeFileReader reads a code file's record: its strings are cut from s,
// the record's one copy, at the reader's place in it.
type codeFileReader struct {
	recordReader
	s string
}

func (d *codeFileReader) str() string {
	n := len(d.take(d.uvarint()))
	if d.err != nil {
		return ""
	}
	end := len(d.s) - len(d.b)
	return d.s[end-n : end]
}

// count reads a list's length, each of whose items takes at least least
// bytes: a length the rest of the record cannot hold is an error, not an
// allocation.
func (d *codeFileReader) count(least int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/least) {
		d.fail(errors.New("list longer than the record"))
		return 0
	}
	return int(n)
}
