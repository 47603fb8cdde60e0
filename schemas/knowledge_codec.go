package schemas

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// An index_update event carries hundreds of IndexedFiles, and decoding
// them by reflection was a twentieth of what indexing a tree costs. These
// methods write exactly what the reflection encoder writes (a map of the
// json names, in field order, empty omitempty fields left out: see
// TestIndexedFileCodecMatchesReflection) and read it back field by field.

// EncodeMsgpack writes f as the reflection encoder does.
func (f *IndexedFile) EncodeMsgpack(e *msgpack.Encoder) error {
	w := fieldWriter{e: e}
	n := 5 + count(f.Package != "") + count(len(f.Imports) > 0) + count(len(f.Symbols) > 0) + count(len(f.Calls) > 0) +
		count(len(f.TermRefs) > 0) + count(f.Terms != "") + count(f.Debt != 0) + count(f.Test) + count(f.Stubbed) + count(f.Redactions != 0) +
		count(f.EmbedHash != "") + count(f.ParseError != "")
	if err := e.EncodeMapLen(n); err != nil {
		return err
	}
	w.str("path", f.Path)
	w.str("hash", f.Hash)
	w.int("size", f.Size)
	w.str("lang", f.Lang)
	w.int("lines", int64(f.Lines))
	w.optStr("package", f.Package)
	if len(f.Imports) > 0 && w.key("imports") && w.arrayLen(len(f.Imports)) {
		for _, imp := range f.Imports {
			w.plain(imp)
		}
	}
	if len(f.Symbols) > 0 && w.key("symbols") && w.arrayLen(len(f.Symbols)) {
		for i := range f.Symbols {
			s := &f.Symbols[i]
			if !w.mapLen(3 + count(s.Recv != "") + count(s.EndLine != 0) + count(s.Signature != "") + count(s.Doc)) {
				break
			}
			w.str("name", s.Name)
			w.str("kind", s.Kind)
			w.optStr("recv", s.Recv)
			w.int("line", int64(s.Line))
			if s.EndLine != 0 {
				w.int("end_line", int64(s.EndLine))
			}
			w.optStr("signature", s.Signature)
			if s.Doc {
				w.bool("doc", true)
			}
		}
	}
	if len(f.Calls) > 0 && w.key("calls") && w.arrayLen(len(f.Calls)) {
		for i := range f.Calls {
			c := &f.Calls[i]
			if !w.mapLen(3) {
				break
			}
			w.str("from", c.From)
			w.str("to", c.To)
			w.int("line", int64(c.Line))
		}
	}
	if len(f.TermRefs) > 0 && w.key("term_refs") {
		w.err = e.EncodeBytes(f.TermRefs)
	}
	w.optStr("terms", f.Terms)
	if f.Debt != 0 {
		w.int("debt", int64(f.Debt))
	}
	if f.Test {
		w.bool("test", true)
	}
	if f.Stubbed {
		w.bool("stubbed", true)
	}
	if f.Redactions != 0 {
		w.int("redactions", int64(f.Redactions))
	}
	w.optStr("embed_hash", f.EmbedHash)
	w.optStr("parse_error", f.ParseError)
	return w.err
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DecodeMsgpack reads what EncodeMsgpack (or the reflection encoder)
// wrote; unknown keys are skipped, as the reflection decoder skips them.
// The file's strings are cut from one (see fileStrings).
func (f *IndexedFile) DecodeMsgpack(d *msgpack.Decoder) error {
	*f = IndexedFile{}
	ss := fileStringsPool.Get().(*fileStrings)
	defer ss.release()
	key := ss.key[:]
	err := decodeMap(d, key, func(k []byte) (err error) {
		switch string(k) {
		case "path":
			err = ss.read(d, &f.Path)
		case "hash":
			err = ss.read(d, &f.Hash)
		case "size":
			f.Size, err = d.DecodeInt64()
		case "lang":
			err = ss.read(d, &f.Lang)
		case "lines":
			f.Lines, err = d.DecodeInt()
		case "package":
			err = ss.read(d, &f.Package)
		case "imports":
			err = decodeArray(d, func(n int) { f.Imports = make([]string, n) }, func(i int) error {
				return ss.read(d, &f.Imports[i])
			})
		case "symbols":
			err = decodeArray(d, func(n int) { f.Symbols = make([]Symbol, n) }, func(i int) error {
				return f.Symbols[i].decode(d, key, ss)
			})
		case "calls":
			err = decodeArray(d, func(n int) { f.Calls = make([]Call, n) }, func(i int) error {
				return f.Calls[i].decode(d, key, ss)
			})
		case "term_refs":
			f.TermRefs, err = d.DecodeBytes()
		case "terms":
			err = ss.read(d, &f.Terms)
		case "debt":
			f.Debt, err = d.DecodeInt()
		case "test":
			f.Test, err = d.DecodeBool()
		case "stubbed":
			f.Stubbed, err = d.DecodeBool()
		case "redactions":
			f.Redactions, err = d.DecodeInt()
		case "embed_hash":
			err = ss.read(d, &f.EmbedHash)
		case "parse_error":
			err = ss.read(d, &f.ParseError)
		default:
			err = d.Skip()
		}
		return err
	})
	ss.finish()
	return err
}

func (s *Symbol) decode(d *msgpack.Decoder, key []byte, ss *fileStrings) error {
	return decodeMap(d, key, func(k []byte) (err error) {
		switch string(k) {
		case "name":
			err = ss.read(d, &s.Name)
		case "kind":
			err = ss.read(d, &s.Kind)
		case "recv":
			err = ss.read(d, &s.Recv)
		case "line":
			s.Line, err = d.DecodeInt()
		case "end_line":
			s.EndLine, err = d.DecodeInt()
		case "signature":
			err = ss.read(d, &s.Signature)
		case "doc":
			s.Doc, err = d.DecodeBool()
		default:
			err = d.Skip()
		}
		return err
	})
}

func (c *Call) decode(d *msgpack.Decoder, key []byte, ss *fileStrings) error {
	return decodeMap(d, key, func(k []byte) (err error) {
		switch string(k) {
		case "from":
			err = ss.read(d, &c.From)
		case "to":
			err = ss.read(d, &c.To)
		case "line":
			c.Line, err = d.DecodeInt()
		default:
			err = d.Skip()
		}
		return err
	})
}

// fileStrings reads the strings of one IndexedFile into one buffer and
// makes them one string at the end (finish), which each field is cut
// from: an event's files hold a dozen strings each, and one allocation a
// string was a sixth of what indexing a tree allocates.
type fileStrings struct {
	buf  []byte
	refs []stringRef
	hdr  [5]byte  // a string's header (here, as a local would escape)
	key  [32]byte // a map key (see decodeMap)
}

// stringRef is a field and where its bytes are in the buffer.
type stringRef struct {
	dst      *string
	off, end int
}

var fileStringsPool = sync.Pool{New: func() any { return new(fileStrings) }}

// read reads a string into dst (at finish). A string of any other
// encoding than msgpack's str family (nil, say) is read as DecodeString
// reads it, at once.
func (s *fileStrings) read(d *msgpack.Decoder, dst *string) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	var h int // the header's length: the code, then the length's bytes
	switch {
	case msgpcode.IsFixedString(c):
		h = 1
	case c == msgpcode.Str8:
		h = 2
	case c == msgpcode.Str16:
		h = 3
	case c == msgpcode.Str32:
		h = 5
	default:
		*dst, err = d.DecodeString()
		return err
	}
	hdr := s.hdr[:h]
	if err := d.ReadFull(hdr); err != nil {
		return err
	}
	var n int
	switch h {
	case 1:
		n = int(c & msgpcode.FixedStrMask)
	case 2:
		n = int(hdr[1])
	case 3:
		n = int(binary.BigEndian.Uint16(hdr[1:]))
	default:
		n = int(binary.BigEndian.Uint32(hdr[1:]))
	}
	off := len(s.buf)
	s.buf = slices.Grow(s.buf, n)[:off+n]
	if err := d.ReadFull(s.buf[off:]); err != nil {
		return err
	}
	s.refs = append(s.refs, stringRef{dst, off, off + n})
	return nil
}

// finish sets each field read to its bytes, cut from one string.
func (s *fileStrings) finish() {
	all := string(s.buf)
	for _, r := range s.refs {
		*r.dst = all[r.off:r.end]
	}
}

// release empties s and puts it back in the pool (a huge buffer is let go).
func (s *fileStrings) release() {
	if cap(s.buf) > 64<<10 {
		s.buf = nil
	}
	clear(s.refs)
	s.buf, s.refs = s.buf[:0], s.refs[:0]
	fileStringsPool.Put(s)
}

// decodeMap reads a map of string keys, calling field with each key (read
// into buf when it is short, so no key is allocated) to read its value. A
// nil map reads as an empty one.
func decodeMap(d *msgpack.Decoder, buf []byte, field func(k []byte) error) error {
	n, err := d.DecodeMapLen()
	if err != nil {
		return err
	}
	for range n {
		c, err := d.PeekCode()
		if err != nil {
			return err
		}
		var k []byte
		if msgpcode.IsFixedString(c) && int(c&msgpcode.FixedStrMask) <= len(buf) {
			if err := d.ReadFull(buf[:1]); err != nil {
				return err
			}
			k = buf[:c&msgpcode.FixedStrMask]
			if err := d.ReadFull(k); err != nil {
				return err
			}
		} else {
			s, err := d.DecodeString()
			if err != nil {
				return fmt.Errorf("a map key: %w", err)
			}
			k = []byte(s)
		}
		if err := field(k); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// decodeArray reads an array: alloc makes room for its n elements, elem
// reads the i-th. A nil array reads as no elements.
func decodeArray(d *msgpack.Decoder, alloc func(n int), elem func(i int) error) error {
	n, err := d.DecodeArrayLen()
	if err != nil || n <= 0 {
		return err
	}
	alloc(n)
	for i := range n {
		if err := elem(i); err != nil {
			return err
		}
	}
	return nil
}

// optStr writes an omitempty string field.
func (w *fieldWriter) optStr(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *fieldWriter) bool(k string, v bool) {
	if w.key(k) {
		w.err = w.e.EncodeBool(v)
	}
}

func (w *fieldWriter) arrayLen(n int) bool {
	if w.err == nil {
		w.err = w.e.EncodeArrayLen(n)
	}
	return w.err == nil
}

func (w *fieldWriter) mapLen(n int) bool {
	if w.err == nil {
		w.err = w.e.EncodeMapLen(n)
	}
	return w.err == nil
}
