package agents

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
)

// TestAwaitConsumersAsksAgainWhenUnanswered: a lookup sent while a cluster
// elects a leader is never answered. Here a relay in front of a real
// JetStream drops the first lookup; the wait asks again and returns, instead
// of waiting until its context ends.
func TestAwaitConsumersAsksAgainWhenUnanswered(t *testing.T) {
	old := awaitAttempt
	awaitAttempt = 100 * time.Millisecond
	t.Cleanup(func() { awaitAttempt = old })
	h := newHarness(t)
	if _, err := h.b.JetStream().CreateOrUpdateConsumer(h.ctx, broker.Stream, jetstream.ConsumerConfig{Durable: ConsumerName("x")}); err != nil {
		t.Fatal(err)
	}
	nc := h.b.Conn()
	var seen atomic.Int32
	sub, err := nc.Subscribe("relay.API.>", func(m *nats.Msg) {
		if seen.Add(1) == 1 {
			return // lost
		}
		resp, err := nc.Request("$JS.API."+strings.TrimPrefix(m.Subject, "relay.API."), m.Data, 5*time.Second)
		if err == nil {
			err = m.Respond(resp.Data)
		}
		if err != nil {
			t.Errorf("relay %s: %v", m.Subject, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	js, err := jetstream.NewWithAPIPrefix(nc, "relay.API")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	if err := AwaitConsumers(ctx, js, []string{"x"}, time.Millisecond, nil); err != nil || ctx.Err() != nil {
		t.Fatalf("AwaitConsumers = %v (context: %v), want it to ask again and find the consumer", err, ctx.Err())
	}
	if n := seen.Load(); n < 2 {
		t.Fatalf("%d lookups, want the lost one asked again", n)
	}
}
