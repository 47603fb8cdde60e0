package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
)

// appendMany appends n user inputs, alternating sessions S1 and S2.
func appendMany(t *testing.T, log *events.Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := log.AppendAsync(userInput(t, fmt.Sprintf("S%d", i%2+1), fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Flush(brokertest.Context(t)); err != nil {
		t.Fatal(err)
	}
}

// scanSeqs scans and returns the sequences fn was given.
func scanSeqs(t *testing.T, log *events.Log, subject string, from events.Cursor, to uint64, each func(*events.Event)) []uint64 {
	t.Helper()
	var got []uint64
	err := log.Scan(brokertest.Context(t), subject, from, to, func(ev *events.Event) error {
		if ev.Env == nil {
			return fmt.Errorf("seq %d not decoded: %v", ev.Seq, ev.Err)
		}
		got = append(got, ev.Seq)
		if each != nil {
			each(ev)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func seqRange(from, to, step uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s += step {
		out = append(out, s)
	}
	return out
}

// A scan reads exactly the range asked for, in order, more events than its
// consumer hands over ahead, and leaves no consumer behind.
func TestScanReadsTheRangeInOrderAndLeavesNoConsumer(t *testing.T) {
	log, b := newLog(t)
	appendMany(t, log, 3000)
	all := events.Filter{}.Subject()
	for _, c := range []struct {
		name    string
		subject string
		from    events.Cursor
		to      uint64
		want    []uint64
	}{
		{"everything", all, events.Cursor{}, 0, seqRange(1, 3000, 1)},
		{"a range", all, events.Cursor{Seq: 10}, 2500, seqRange(10, 2500, 1)},
		{"one session", events.Filter{Session: "S2"}.Subject(), events.Cursor{}, 0, seqRange(2, 3000, 2)},
		{"past the end", all, events.Cursor{Seq: 3001}, 0, nil},
		{"new", all, events.Cursor{New: true}, 0, nil},
	} {
		if got := scanSeqs(t, log, c.subject, c.from, c.to, nil); !slices.Equal(got, c.want) {
			t.Errorf("%s: %d events %v...; want %d", c.name, len(got), got[:min(len(got), 5)], len(c.want))
		}
	}
	stream, err := b.JetStream().Stream(brokertest.Context(t), broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	names := stream.ConsumerNames(brokertest.Context(t))
	for n := range names.Name() {
		t.Errorf("consumer %s left on the stream", n)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

// A scan whose consumer goes away mid-way continues with a new one after the
// last event it handed over: no gap, no duplicate. Each consumer here is
// deleted at the first event it hands over, long before it can have pushed
// the 12 MB of events behind (flow control holds it to a few MB); the scan
// notices from the missing heartbeats.
func TestScanContinuesWhenItsConsumerIsLost(t *testing.T) {
	events.SetScanHeartbeat(t, 100*time.Millisecond)
	log, b := newLog(t)
	const n = 6000
	big := strings.Repeat("x", 2000)
	for range n {
		if _, err := log.AppendAsync(userInput(t, "S1", big)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := brokertest.Context(t)
	if err := log.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stream, err := b.JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	got := scanSeqs(t, log, events.Filter{}.Subject(), events.Cursor{}, 0, func(ev *events.Event) {
		if len(seen) == 3 {
			return
		}
		for info := range stream.ListConsumers(ctx).Info() {
			if info.Config.DeliverSubject == "" || seen[info.Name] {
				continue
			}
			seen[info.Name] = true
			if err := stream.DeleteConsumer(ctx, info.Name); err != nil {
				t.Error(err)
			}
		}
	})
	if len(seen) != 3 {
		t.Errorf("the scan used %d consumers, want 3 deleted and a fourth to finish", len(seen)+1)
	}
	if want := seqRange(1, n, 1); !slices.Equal(got, want) {
		t.Fatalf("got %d events, want 1..%d once each, in order", len(got), n)
	}
}

// A consumer creation nobody answers (a request sent while a cluster elects
// a leader) ends the scan's attempt, not the read: the scan asks again, then
// fails with an error long before its caller's context ends, so a caller
// that polls reads again once the cluster answers.
func TestScanDoesNotHangOnAnUnansweredConsumerCreation(t *testing.T) {
	events.SetGetAttempt(t, 100*time.Millisecond)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// Every JetStream request reaches a subscriber that never replies.
	if _, err := nc.Subscribe("$JS.API.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = events.New(js).Read(ctx, broker.StreamSubjects, events.Cursor{}, 0)
	if ctx.Err() != nil {
		t.Fatalf("the read waited until its context ended (%v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "no answer to the consumer's creation") {
		t.Fatalf("read = %v, want the unanswered creation named", err)
	}
}
