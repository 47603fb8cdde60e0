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
