package bench

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
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
		err := readIDs(r, size, func(ids []uint64) error { got = append(got, ids...); return nil })
		if !errors.Is(err, io.EOF) {
			t.Errorf("size %d: %v, want EOF", size, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("size %d: got %v, want 1..200", size, got)
		}
	}
	err := readIDs(strings.NewReader("id: 1\nid: x2\n"), 64, func([]uint64) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `id "x2": not a stream sequence`) {
		t.Errorf("a bad id: %v", err)
	}
}

// TestServeViewers: the viewers' process opens its streams on "open URL"
// (each with the token), answers the fewest events of a range any viewer
// has once all have them or the wait is over, closes every stream on
// "close", and opens them again; a refused stream and a question while
// closed are errors.
func TestServeViewers(t *testing.T) {
	const token, viewers = "tok", 3
	var open atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(rw, "no", http.StatusUnauthorized)
			return
		}
		open.Add(1)
		defer open.Add(-1)
		rw.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(rw, ": live\n\n")
		for seq := 11; seq <= 15; seq++ {
			fmt.Fprintf(rw, "id: %d\ndata: {}\n\n", seq)
		}
		rw.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()

	start := func(token string) (ask func(string) string, done <-chan error) {
		in, toViewers := io.Pipe()
		fromViewers, out := io.Pipe()
		errc := make(chan error, 1)
		go func() {
			err := serveViewers(t.Context(), in, out, io.Discard, token, viewers, 200*time.Millisecond)
			out.CloseWithError(cmp.Or(err, io.EOF))
			errc <- err
		}()
		t.Cleanup(func() { toViewers.Close() })
		answers := bufio.NewScanner(fromViewers)
		return func(line string) string {
			t.Helper()
			fmt.Fprintln(toViewers, line)
			if !answers.Scan() {
				return "ended: " + answers.Err().Error()
			}
			return answers.Text()
		}, errc
	}

	ask, done := start(token)
	for range 2 { // opened again after a close
		if got := ask("open " + srv.URL); !strings.HasPrefix(got, "open ") {
			t.Fatalf("open: %q", got)
		}
		if n := open.Load(); n != viewers {
			t.Errorf("%d streams open, want %d", n, viewers)
		}
		if got := ask("10 15"); got != "5" {
			t.Errorf("events (10, 15]: %q, want 5", got)
		}
		if got := ask("12 14"); got != "2" {
			t.Errorf("events (12, 14]: %q, want 2", got)
		}
		// 16 never comes: the answer comes after the wait.
		if got := ask("10 16"); got != "5" {
			t.Errorf("events (10, 16], one never sent: %q, want 5", got)
		}
		if got := ask("close"); !strings.HasPrefix(got, "closed ") {
			t.Fatalf("close: %q", got)
		}
		if !brokertest.Poll(5*time.Second, func() bool { return open.Load() == 0 }) {
			t.Errorf("%d streams open after close", open.Load())
		}
	}
	if got := ask("10 15"); !strings.HasPrefix(got, "ended") {
		t.Errorf("a question while closed: %q, want the viewers to end", got)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "want open URL") {
		t.Errorf("a question while closed: %v", err)
	}

	ask, done = start("wrong")
	if got := ask("open " + srv.URL); !strings.HasPrefix(got, "ended") {
		t.Errorf("open with a wrong token: %q, want the viewers to end", got)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("open with a wrong token: %v", err)
	}
}

// TestViewerCounts: a viewer counts the events of a range it got, gaps
// left out, and an event out of order or twice is an error.
func TestViewerCounts(t *testing.T) {
	var v sseViewer
	if err := v.add([]uint64{3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := v.add([]uint64{8, 9}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		first, last uint64
		want        int
	}{{0, 100, 5}, {2, 9, 5}, {3, 8, 3}, {4, 4, 0}, {5, 7, 0}, {4, 8, 2}, {9, 20, 0}} {
		if got := v.count(c.first, c.last); got != c.want {
			t.Errorf("events of (%d, %d]: %d, want %d", c.first, c.last, got, c.want)
		}
	}
	for _, seq := range []uint64{9, 7} {
		if err := v.add([]uint64{seq}); err == nil || !strings.Contains(err.Error(), "want each once, in order") {
			t.Errorf("event %d after 9: %v", seq, err)
		}
	}
}
