package projections

import (
	"encoding/binary"
	"errors"
)

// recordReader reads the varints and byte strings of a stored binary record
// (an audit chunk or entry, a code file's record) until its first error:
// every read after it returns zero and leaves b where the error was.
type recordReader struct {
	b   []byte
	err error
}

// errTruncated: a record ends in the middle of a value.
var errTruncated = errors.New("truncated")

func (d *recordReader) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// take returns the next n bytes, not copied (nil past the end).
func (d *recordReader) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *recordReader) byte() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *recordReader) uvarint() uint64 { return readVarint(d, binary.Uvarint) }

func (d *recordReader) varint() int64 { return readVarint(d, binary.Varint) }

// readVarint reads one varint with read (binary.Uvarint or binary.Varint).
func readVarint[T uint64 | int64](d *recordReader, read func([]byte) (T, int)) T {
	if d.err != nil {
		return 0
	}
	x, n := read(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes reads a length and that many bytes, not copied.
func (d *recordReader) bytes() []byte { return d.take(d.uvarint()) }
