package events

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/schemas"
)

// ackMetadata reads both forms of ack subject the server sends, and refuses
// anything else.
func TestAckMetadata(t *testing.T) {
	want := ackMeta{sseq: 42, dseq: 7, pending: 3, time: time.Unix(0, 1700000000123456789)}
	for _, reply := range []string{
		"$JS.ACK.SYLK.c1.1.42.7.1700000000123456789.3",
		"$JS.ACK._.ACCHASH.SYLK.c1.1.42.7.1700000000123456789.3.tok",
		"$JS.ACK.dom.ACCHASH.SYLK.c1.1.42.7.1700000000123456789.3",
	} {
		got, err := ackMetadata(reply)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", reply, got, err, want)
		}
	}
	for _, reply := range []string{
		"", "$JS.ACK.SYLK.c1.1.42.7.3", "$JS.ACK.SYLK.c1.1.x.7.1700000000123456789.3",
		"$JS.ACK.a.b.c.d.e.f.g.h.i.j.k.l.m",
	} {
		if got, err := ackMetadata(reply); err == nil {
			t.Errorf("%q: %+v, want an error", reply, got)
		}
	}
}

// A heartbeat names the last delivery its consumer sent: a scan that has
// received less lost deliveries on the way, and with nothing behind them to
// show the gap it would wait on a live consumer. The heartbeat here is a
// real one, from a consumer that has sent three events.
func TestHeartbeatShowsLostDeliveries(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	l := New(b.JetStream())
	for i := range 3 {
		env, err := schemas.New(schemas.TypeUserInput, "S1", "user", "", time.Now(), schemas.UserInput{Text: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	msgs := make(chan *nats.Msg, 16)
	inbox := b.Conn().NewInbox()
	sub, err := b.Conn().ChanSubscribe(inbox, msgs)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if _, err := b.JetStream().CreatePushConsumer(ctx, broker.Stream, jetstream.ConsumerConfig{
		DeliverSubject: inbox, AckPolicy: jetstream.AckNonePolicy, IdleHeartbeat: 100 * time.Millisecond,
		InactiveThreshold: time.Minute, MemoryStorage: true,
	}); err != nil {
		t.Fatal(err)
	}
	var beat *nats.Msg
	for beat == nil {
		select {
		case m := <-msgs:
			if m.Header.Get("Status") == "100" && m.Reply == "" {
				beat = m
			}
		case <-ctx.Done():
			t.Fatal("no heartbeat")
		}
	}
	if err := control(b.Conn(), beat, 3); err != nil {
		t.Errorf("all three received: %v, want nil", err)
	}
	if err := control(b.Conn(), beat, 2); !errors.Is(err, errScanLost) || !strings.Contains(err.Error(), "sent delivery 3, the last received is 2") {
		t.Errorf("two of three received: %v, want the scan's consumer lost, naming both deliveries", err)
	}
}

// On a cluster, a scan's consumer counts what is pending in its own member's
// copy of the stream, which may still be catching up with the leader: a count
// of 0 ends the scan only once it has read the last matching event the leader
// holds (TestClusterSurvivesLeaderKill saw a read of the whole session end
// 30 nodes short after a member restarted). Here the leader's answer is
// checked on a real three-member cluster: for a subject with a wildcard, for
// one nothing matches, and within a scan's upper bound. On one server the
// count is trusted, with no question asked.
func TestCaughtUpAsksTheStreamLeader(t *testing.T) {
	ctx := brokertest.Context(t)
	dirs := brokertest.ClusterDataDirs(t, 3, nil)
	addrs := brokertest.FreeAddrs(t, 3)
	members := brokertest.StartMembers(t, dirs, addrs, []int{0, 1, 2}, 3)
	l := New(members[1].JetStream())
	var s1 []uint64
	for i, session := range []string{"S1", "S2", "S1", "S2", "S2"} {
		env, err := schemas.New(schemas.TypeUserInput, session, "user", "", time.Now(), schemas.UserInput{Text: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := l.Append(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		if session == "S1" {
			s1 = append(s1, seq)
		}
	}
	subject := Filter{Session: "S1"}.Subject()
	for _, tc := range []struct {
		subject  string
		to, read uint64
		want     bool
	}{
		{subject, 0, s1[0], false},
		{subject, 0, s1[1] - 1, false},
		{subject, 0, s1[1], true},
		{subject, s1[0], s1[0], true},
		{Filter{Session: "S3"}.Subject(), 0, 0, true},
	} {
		s := &scan{to: tc.to}
		done, err := l.caughtUp(ctx, tc.subject, s, tc.read)
		if err != nil || done != tc.want {
			t.Errorf("%s up to %d, read to %d: caught up %v, %v; want %v", tc.subject, tc.to, tc.read, done, err, tc.want)
		}
	}
	evs, err := l.Read(ctx, subject, Cursor{}, 0)
	if err != nil || len(evs) != 2 || evs[1].Seq != s1[1] {
		t.Fatalf("read S1 on the cluster: %d events, %v; want seqs %v", len(evs), err, s1)
	}

	one := brokertest.Start(t, brokertest.Options(t))
	s := &scan{}
	if done, err := New(one.JetStream()).caughtUp(ctx, subject, s, 0); !done || err != nil || s.askedLeader {
		t.Errorf("one server: caught up %v, %v, asked the leader %v; want true, nil, false", done, err, s.askedLeader)
	}
}

// A follower applies what the leader commits a moment after the leader
// acknowledges it, and answers direct gets from its own copy. Reads through
// a follower's connection must still see every event an append was told is
// stored: Get, a bodies read of the stream's tail, and the last event on a
// subject. Each read is followed by a plain direct get of the same event:
// when that still misses, the read before it met a copy that lagged, so the
// test goes on until that has happened a few times.
func TestReadsOnAFollowerSeeEveryAcknowledgedEvent(t *testing.T) {
	ctx := brokertest.Context(t)
	dirs := brokertest.ClusterDataDirs(t, 3, nil)
	addrs := brokertest.FreeAddrs(t, 3)
	members := brokertest.StartMembers(t, dirs, addrs, []int{0, 1, 2}, 3)
	info, err := members[0].JetStream().Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	follower := members[0]
	if follower.ServerName() == info.CachedInfo().Cluster.Leader {
		follower = members[1]
	}
	js := follower.JetStream()
	stream, err := js.Stream(ctx, broker.Stream)
	if err != nil {
		t.Fatal(err)
	}
	l := New(js)
	lagged := map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for i := 0; lagged["get"] < 3 || lagged["bodies"] < 3 || lagged["last"] < 3; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("%d appends in a minute, and the follower's copy lagged only %v times: the reads were not tested against a lagging copy", i, lagged)
		}
		session := fmt.Sprintf("S%d", i)
		env, err := schemas.New(schemas.TypeUserInput, session, "user", "", time.Now(), schemas.UserInput{Text: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := l.Append(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		var read string
		switch i % 3 {
		case 0:
			read = "get"
			if ev, err := l.Get(ctx, seq); err != nil || ev.Seq != seq {
				t.Fatalf("get %d on a follower: %v", seq, err)
			}
		case 1:
			read = "bodies"
			var got []uint64
			err := l.Scan(ctx, broker.StreamSubjects, Cursor{Seq: seq}, 0, func(ev *Event) error {
				got = append(got, ev.Seq)
				return nil
			}, Bodies())
			if err != nil || len(got) != 1 || got[0] != seq {
				t.Fatalf("bodies read from %d on a follower: %v, %v; want [%d]", seq, got, err, seq)
			}
		case 2:
			read = "last"
			subject := Filter{Session: session}.Subject()
			m, err := broker.LastMsgFor(ctx, js, broker.Stream, subject)
			if err != nil || m.Sequence != seq {
				t.Fatalf("last on %s on a follower: %v; want seq %d", subject, err, seq)
			}
		}
		if _, err := stream.GetMsg(ctx, seq); errors.Is(err, jetstream.ErrMsgNotFound) {
			lagged[read]++
		}
	}
}
