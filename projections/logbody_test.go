package projections

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sylk/sylk/schemas"
)

// The session log keeps an index_update without its payload, and every
// reader of the log gets the event as it was appended: SessionLog its
// bytes (read back from the stream), the session's last activity, a time
// bound and a trace its envelope. A small one is kept whole.
func TestSessionLogLeavesIndexPayloadsInTheStream(t *testing.T) {
	ctx, log, _, s := setup(t)
	appendSession(t, ctx, log, "S1")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	up := schemas.IndexUpdate{Root: "/w"}
	for i := range 200 {
		up.Files = append(up.Files, schemas.IndexedFile{Path: fmt.Sprintf("pkg/f%03d.go", i), Hash: fmt.Sprintf("%032x", i), Lang: "go"})
	}
	big, err := schemas.New(schemas.TypeIndexUpdate, "S1", "librarian", "user", at, up)
	if err != nil {
		t.Fatal(err)
	}
	small, err := schemas.New(schemas.TypeIndexUpdate, "S1", "librarian", "user", at.Add(time.Second), schemas.IndexUpdate{Root: "/w", Removed: []string{"gone.go"}})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	var sent [][]byte
	for _, env := range []*schemas.Envelope{big, small} {
		seq, err := log.Append(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		data, err := schemas.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		seqs, sent = append(seqs, seq), append(sent, data)
	}
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}

	stored, err := getFrom(s.db, logKey("S1", seqs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || stored[0] != logBodyInStream || len(stored) > 1024 {
		t.Fatalf("the big update's entry is %d bytes (first %x), want its envelope alone", len(stored), stored[:min(len(stored), 1)])
	}
	if kept, err := getFrom(s.db, logKey("S1", seqs[1])); err != nil || !bytes.Equal(kept, sent[1]) {
		t.Fatalf("the small update's entry is not its bytes (%v)", err)
	}

	page, err := s.SessionLog(ctx, LogQuery{Session: "S1"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64][]byte{}
	for _, e := range page.Entries {
		got[e.Seq] = e.Data
	}
	for i, seq := range seqs {
		if !bytes.Equal(got[seq], sent[i]) {
			t.Fatalf("SessionLog's entry at seq %d is not the event appended", seq)
		}
	}
	// A time bound reads the entry's envelope: the big update is in, the
	// small one after the bound is not.
	page, err = s.SessionLog(ctx, LogQuery{Session: "S1", UntilTime: at})
	if err != nil {
		t.Fatal(err)
	}
	if last := page.Entries[len(page.Entries)-1]; last.Seq != seqs[0] || !bytes.Equal(last.Data, sent[0]) {
		t.Fatalf("until %v: the last entry is seq %d", at, last.Seq)
	}
	sess, err := s.Session(ctx, "S1")
	if err != nil {
		t.Fatal(err)
	}
	if sess.LastSeq != seqs[1] || !sess.LastActiveAt.Equal(at.Add(time.Second)) {
		t.Fatalf("session: last seq %d, last active %v", sess.LastSeq, sess.LastActiveAt)
	}
	tr, err := s.Trace(ctx, big.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Hops) != 1 || tr.Hops[0].Type != schemas.TypeIndexUpdate || !tr.Hops[0].At.Equal(at) {
		t.Fatalf("trace: %+v", tr.Hops)
	}

	// A store that reads no stream cannot give the payload back, and says
	// so rather than answering with the envelope alone.
	s.mu.Lock()
	s.projector.src = nil
	s.mu.Unlock()
	if _, err := s.SessionLog(ctx, LogQuery{Session: "S1"}); !errors.Is(err, errNoLogSource) {
		t.Fatalf("without a stream: %v", err)
	}
}
