package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// OnDeadLetter hears of every decodable message the runner gives up on, by
// its handler's permanent error or by the server's MaxDeliver advisory, and
// what it returns is appended once however often it is told.
func TestOnDeadLetterReportsWhatWasGivenUp(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var reasons []string
	report := func(d *Delivery, reason string) ([]*schemas.Envelope, error) {
		mu.Lock()
		reasons = append(reasons, reason)
		mu.Unlock()
		p, _ := schemas.PayloadAs[schemas.UserInput](d.Env)
		out, err := d.Derive(schemas.TypeNotice, "user", "gave-up", schemas.Notice{Level: schemas.NoticeError, Text: "gave up on " + p.Text})
		return []*schemas.Envelope{out}, err
	}
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		return nil, Permanent(errors.New("cannot do it"))
	}), Options{Agent: "worker", OnDeadLetter: report})
	notices := events.Filter{Type: schemas.TypeNotice}.Subject()

	// The handler's permanent error.
	h.send("S1", "worker", "first")
	brokertest.Eventually(t, 10*time.Second, "the report of the permanent error", func() bool { return h.count(notices) == 1 })

	// The server's advisory that deliveries ran out (crashes, ack timeouts):
	// every process of the kind hears it, so it comes twice here.
	env := h.send("S1", "elsewhere", "second")
	seq := h.events(events.Filter{Target: "elsewhere"}.Subject())[0].Seq
	adv := fmt.Appendf(nil, `{"stream_seq": %d, "deliveries": 10}`, seq)
	subject := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", broker.Stream, ConsumerName("worker"))
	for range 2 {
		if err := h.b.Conn().Publish(subject, adv); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.Eventually(t, 10*time.Second, "both advisories reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reasons) == 3
	})
	evs := h.events(notices)
	if len(evs) != 2 {
		t.Fatalf("%d reports appended, want 2 (the advisory's once)", len(evs))
	}
	p, _ := schemas.PayloadAs[schemas.Notice](evs[1].Env)
	if p.Text != "gave up on second" || evs[1].Env.ParentID != env.ID {
		t.Fatalf("report %+v of %s", p, evs[1].Env.ParentID)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(reasons[0], "cannot do it") || !strings.Contains(reasons[1], "not acknowledged after 10 deliveries") {
		t.Fatalf("reasons %q", reasons)
	}
}
