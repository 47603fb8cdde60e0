package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadIDs: the viewers get the id of every event, whatever the reads'
// sizes: lines split across reads, data lines longer than the buffer,
// comments; and a bad id is an error.
func TestReadIDs(t *testing.T) {
	var stream strings.Builder
	var want []uint64
	stream.WriteString(": live\n\n")
	for seq := uint64(1); seq <= 200; seq++ {
		data := strings.Repeat("x", int(seq%7)*10)
		if seq%50 == 0 {
			data = strings.Repeat("y", 300) // longer than the buffer
		}
		fmt.Fprintf(&stream, "id: %d\ndata: {\"seq\":%d,\"d\":\"%s\"}\n\n", seq, seq, data)
		want = append(want, seq)
	}
	for _, size := range []int{64, 100, 4096} {
		var got []uint64
		r := iotest.OneByteReader(strings.NewReader(stream.String()))
		if size == 4096 {
			r = strings.NewReader(stream.String())
		}
		err := readIDs(r, size, func(ids []uint64) { got = append(got, ids...) })
		if !errors.Is(err, io.EOF) {
			t.Errorf("size %d: %v, want EOF", size, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("size %d: got %v, want 1..200", size, got)
		}
	}
	err := readIDs(strings.NewReader("id: 1\nid: x2\n"), 64, func([]uint64) {})
	if err == nil || !strings.Contains(err.Error(), `id "x2": not a stream sequence`) {
		t.Errorf("a bad id: %v", err)
	}
}
