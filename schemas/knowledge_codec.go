package schemas

import (
	"fmt"

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
func (f *IndexedFile) DecodeMsgpack(d *msgpack.Decoder) error {
	*f = IndexedFile{}
	var key [32]byte
	return decodeMap(d, key[:], func(k []byte) (err error) {
		switch string(k) {
		case "path":
			f.Path, err = d.DecodeString()
		case "hash":
			f.Hash, err = d.DecodeString()
		case "size":
			f.Size, err = d.DecodeInt64()
		case "lang":
			f.Lang, err = d.DecodeString()
		case "lines":
			f.Lines, err = d.DecodeInt()
		case "package":
			f.Package, err = d.DecodeString()
		case "imports":
			err = decodeArray(d, func(n int) { f.Imports = make([]string, n) }, func(i int) (err error) {
				f.Imports[i], err = d.DecodeString()
				return err
			})
		case "symbols":
			err = decodeArray(d, func(n int) { f.Symbols = make([]Symbol, n) }, func(i int) error {
				return f.Symbols[i].decode(d, key[:])
			})
		case "calls":
			err = decodeArray(d, func(n int) { f.Calls = make([]Call, n) }, func(i int) error {
				return f.Calls[i].decode(d, key[:])
			})
		case "term_refs":
			f.TermRefs, err = d.DecodeBytes()
		case "terms":
			f.Terms, err = d.DecodeString()
		case "debt":
			f.Debt, err = d.DecodeInt()
		case "test":
			f.Test, err = d.DecodeBool()
		case "stubbed":
			f.Stubbed, err = d.DecodeBool()
		case "redactions":
			f.Redactions, err = d.DecodeInt()
		case "embed_hash":
			f.EmbedHash, err = d.DecodeString()
		case "parse_error":
			f.ParseError, err = d.DecodeString()
		default:
			err = d.Skip()
		}
		return err
	})
}

func (s *Symbol) decode(d *msgpack.Decoder, key []byte) error {
	return decodeMap(d, key, func(k []byte) (err error) {
		switch string(k) {
		case "name":
			s.Name, err = d.DecodeString()
		case "kind":
			s.Kind, err = d.DecodeString()
		case "recv":
			s.Recv, err = d.DecodeString()
		case "line":
			s.Line, err = d.DecodeInt()
		case "end_line":
			s.EndLine, err = d.DecodeInt()
		case "signature":
			s.Signature, err = d.DecodeString()
		case "doc":
			s.Doc, err = d.DecodeBool()
		default:
			err = d.Skip()
		}
		return err
	})
}

func (c *Call) decode(d *msgpack.Decoder, key []byte) error {
	return decodeMap(d, key, func(k []byte) (err error) {
		switch string(k) {
		case "from":
			c.From, err = d.DecodeString()
		case "to":
			c.To, err = d.DecodeString()
		case "line":
			c.Line, err = d.DecodeInt()
		default:
			err = d.Skip()
		}
		return err
	})
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
