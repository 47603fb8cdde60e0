package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
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

// An event whose body claims another sender than the subject it was
// published on (which the server vouches for) is dead-lettered, not handled.
func TestForgedSourceIsDeadLettered(t *testing.T) {
	h := newHarness(t)
	var handled sync.Map
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		p, _ := schemas.PayloadAs[schemas.UserInput](d.Env)
		handled.Store(p.Text, true)
		return nil, nil
	}), Options{Agent: "worker"})

	forged, _ := schemas.New(schemas.TypeUserInput, "S1", "orchestrator", "worker", time.Now(), schemas.UserInput{Text: "forged"})
	msg, err := events.Message(forged)
	if err != nil {
		t.Fatal(err)
	}
	msg.Subject = "sylk.v1.S1.engineer.worker.user_input" // an engineer's credential may publish here
	if _, err := h.b.JetStream().PublishMsg(h.ctx, msg); err != nil {
		t.Fatal(err)
	}
	h.send("S1", "worker", "honest")
	brokertest.Eventually(t, 10*time.Second, "the honest event handled", func() bool { _, ok := handled.Load("honest"); return ok })
	m := h.dlq(t, "agent-worker", 1)[0]
	if reason := m.Header.Get(HeaderDLQReason); !strings.Contains(reason, "forged source") || !strings.Contains(reason, `"orchestrator"`) || !strings.Contains(reason, `"engineer"`) {
		t.Fatalf("DLQ reason %q", reason)
	}
	if _, ok := handled.Load("forged"); ok {
		t.Fatal("the forged event was handled")
	}
	brokertest.Eventually(t, 10*time.Second, "a dead_letter event", func() bool {
		return h.count(events.Filter{Type: schemas.TypeDeadLetter}.Subject()) == 1
	})

	// Resending runs with the operator's credential, which may publish as
	// anyone: the forgery is refused, not stored under the orchestrator.
	if _, err := ResendDeadLetter(h.ctx, h.b.JetStream(), m.Sequence, time.Now()); !errors.Is(err, events.ErrForgedSource) {
		t.Fatalf("resending the forged event: err %v, want %v", err, events.ErrForgedSource)
	}
	if n := h.count(events.Filter{Source: "orchestrator"}.Subject()); n != 0 {
		t.Fatalf("%d events stored as the orchestrator's", n)
	}
}

// A message dead-lettered for a cause that is then fixed is handled once
// resent (ResendDeadLetter, what `sylk dlq resend` and the web view's Resend
// do): the projections hold the handler's answer to the resent copy, and
// the message is not given up a second time.
func TestResentDeadLetterIsHandledOnceTheCauseIsFixed(t *testing.T) {
	h := newHarness(t)
	store, err := projections.Open(h.ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(h.ctx)
	folded := make(chan struct{})
	go func() { defer close(folded); store.Projector(h.log).Run(pctx) }()
	t.Cleanup(func() { stop(); <-folded; store.Close() })

	// The cause: the worker's workspace is not set up; a message that comes
	// meanwhile cannot be handled, and is given up at once.
	workspace := filepath.Join(t.TempDir(), "workspace")
	h.run(HandlerFunc(func(ctx context.Context, d *Delivery) ([]*schemas.Envelope, error) {
		p, err := schemas.PayloadAs[schemas.UserInput](d.Env)
		if err != nil {
			return nil, Permanent(err)
		}
		if _, err := os.Stat(workspace); err != nil {
			return nil, Permanent(fmt.Errorf("the workspace is not set up: %w", err))
		}
		out, err := d.Derive(schemas.TypeNotice, "user", "done", schemas.Notice{Level: schemas.NoticeInfo, Text: "built " + p.Text})
		return []*schemas.Envelope{out}, err
	}), Options{Agent: "worker"})

	orig := h.send("S1", "worker", "the report")
	dl := h.dlq(t, "agent-worker", 1)[0]
	if reason := dl.Header.Get(HeaderDLQReason); !strings.Contains(reason, "the workspace is not set up") {
		t.Fatalf("DLQ reason %q", reason)
	}

	// The cause fixed, the dead letter resent.
	if err := os.Mkdir(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	resent, err := ResendDeadLetter(h.ctx, h.b.JetStream(), dl.Sequence, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resent.ID == "" || resent.ID == orig.ID {
		t.Fatalf("resent as %+v, want a new envelope", resent)
	}

	// The projections: the session's log holds the answer to the resent
	// copy, after it, and one dead letter, the original's.
	var answer *schemas.Envelope
	var deadLetters int
	brokertest.Eventually(t, 10*time.Second, "the answer to the resent message in the session's log", func() bool {
		page, err := store.SessionLog(h.ctx, projections.LogQuery{Session: "S1"})
		if err != nil {
			t.Fatal(err)
		}
		answer, deadLetters = nil, 0
		for _, e := range page.Entries {
			env, err := schemas.Unmarshal(e.Data)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case env.Type == schemas.TypeNotice && env.ParentID == resent.ID && e.Seq > resent.Seq:
				answer = env
			case env.Type == schemas.TypeDeadLetter:
				deadLetters++
			}
		}
		return answer != nil
	})
	if p, _ := schemas.PayloadAs[schemas.Notice](answer); p.Text != "built the report" {
		t.Fatalf("the answer says %q", p.Text)
	}
	if deadLetters != 1 {
		t.Fatalf("%d dead letters in the session's log, want the original's only", deadLetters)
	}
	h.dlq(t, "agent-worker", 1)
}
