package events_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
)

// scanBodies runs a Bodies scan of the whole stream and returns each event's
// sequence, pending count and bytes.
func scanBodies(t *testing.T, log *events.Log, from events.Cursor, to uint64) (seqs, pending []uint64, data [][]byte) {
	t.Helper()
	err := log.Scan(brokertest.Context(t), broker.StreamSubjects, from, to, func(ev *events.Event) error {
		if ev.Env == nil {
			return fmt.Errorf("seq %d not decoded: %v", ev.Seq, ev.Err)
		}
		seqs, pending, data = append(seqs, ev.Seq), append(pending, ev.Pending), append(data, ev.Data)
		return nil
	}, events.Bodies())
	if err != nil {
		t.Fatal(err)
	}
	return seqs, pending, data
}

// A bodies read hands over exactly the range asked for, in order, over
// several direct-get answers, with the same bytes a consumer scan reads and
// the count of events after each one up to the end of the read.
func TestBodiesReadTheRangeWithTheScansBytes(t *testing.T) {
	log, _ := newLog(t)
	appendMany(t, log, 9000) // more than two answers of 4096
	var want [][]byte
	scanSeqs(t, log, broker.StreamSubjects, events.Cursor{}, 0, func(ev *events.Event) { want = append(want, ev.Data) })

	seqs, pending, data := scanBodies(t, log, events.Cursor{}, 0)
	if !slices.Equal(seqs, seqRange(1, 9000, 1)) {
		t.Fatalf("read %d events (%v...), want 1..9000", len(seqs), seqs[:min(len(seqs), 5)])
	}
	for i := range data {
		if string(data[i]) != string(want[i]) {
			t.Fatalf("seq %d: the bodies read's bytes differ from the consumer scan's", i+1)
		}
		if pending[i] != uint64(9000-i-1) {
			t.Fatalf("seq %d: pending %d, want %d", i+1, pending[i], 9000-i-1)
		}
	}

	seqs, pending, _ = scanBodies(t, log, events.Cursor{Seq: 4000}, 8200)
	if !slices.Equal(seqs, seqRange(4000, 8200, 1)) || pending[len(pending)-1] != 0 {
		t.Fatalf("4000..8200 read %d events from %d to %d, last pending %d", len(seqs), seqs[0], seqs[len(seqs)-1], pending[len(pending)-1])
	}
	if seqs, _, _ := scanBodies(t, log, events.Cursor{Seq: 9001}, 0); len(seqs) != 0 {
		t.Fatalf("a read past the end gave %v", seqs)
	}
}

// A stream with deleted messages has gaps a headerless answer cannot number:
// the bodies read asks again with headers and skips exactly the gaps.
func TestBodiesReadSkipsGaps(t *testing.T) {
	b := brokertest.StartMutable(t)
	log := events.New(b.JetStream())
	appendMany(t, log, 5000)
	ctx := brokertest.Context(t)
	s, err := b.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	gone := []uint64{1, 2, 3000, 4097, 4999}
	for _, seq := range gone {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("delete seq %d: %v", seq, err)
		}
	}
	seqs, _, _ := scanBodies(t, log, events.Cursor{}, 0)
	var want []uint64
	for seq := uint64(1); seq <= 5000; seq++ {
		if !slices.Contains(gone, seq) {
			want = append(want, seq)
		}
	}
	if !slices.Equal(seqs, want) {
		t.Fatalf("read %d events, want the %d left; first %v", len(seqs), len(want), seqs[:min(len(seqs), 5)])
	}
}

// A read of part of the stream (a subject filter, or from a time) is no
// bodies read: it reads with a consumer as before.
func TestBodiesOnlyForTheWholeStream(t *testing.T) {
	log, _ := newLog(t)
	appendMany(t, log, 10)
	var got []uint64
	err := log.Scan(brokertest.Context(t), events.Prefix+".S1.>", events.Cursor{}, 0, func(ev *events.Event) error {
		if ev.Subject == "" || ev.Header == nil {
			return fmt.Errorf("seq %d: a filtered read lost its subject or headers", ev.Seq)
		}
		got = append(got, ev.Seq)
		return nil
	}, events.Bodies())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, seqRange(1, 9, 2)) {
		t.Fatalf("S1's events: %v", got)
	}
}

// After a purge the stream keeps its last sequence and holds nothing: a
// bodies read from before it ends at once, as a consumer's would.
func TestBodiesReadOfAPurgedStreamEnds(t *testing.T) {
	b := brokertest.StartMutable(t)
	log := events.New(b.JetStream())
	appendMany(t, log, 100)
	ctx := brokertest.Context(t)
	s, err := b.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	appendMany(t, log, 3)
	if seqs, _, _ := scanBodies(t, log, events.Cursor{Seq: 50}, 0); !slices.Equal(seqs, []uint64{101, 102, 103}) {
		t.Fatalf("read %v after the purge, want 101..103", seqs)
	}
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if seqs, _, _ := scanBodies(t, log, events.Cursor{Seq: 50}, 0); len(seqs) != 0 {
		t.Fatalf("read %v from an empty stream", seqs)
	}
}
