package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// TestBreakerKeepsItsNewestChange: Follow reads the breakers' history while
// the projector hands over the live changes, so an older change can come
// after a newer one: the breaker shows the newer.
func TestBreakerKeepsItsNewestChange(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	m := New(b.JetStream(), nil)
	change := func(seq uint64, to string) {
		t.Helper()
		env, err := schemas.New(schemas.TypeCircuitChange, schemas.SystemSession, "engineer", "", time.Now(), schemas.CircuitChange{Resource: "subprocess", To: to})
		if err != nil {
			t.Fatal(err)
		}
		m.observe(&events.Event{Seq: seq, Env: env}, nil)
	}
	state := func() (open, closed float64) {
		return testutil.ToFloat64(m.breakers.WithLabelValues("engineer", "subprocess", "open")),
			testutil.ToFloat64(m.breakers.WithLabelValues("engineer", "subprocess", "closed"))
	}
	change(7, "open")
	change(5, "closed") // from the history, read late
	if open, closed := state(); open != 1 || closed != 0 {
		t.Errorf("after the change at 7 (open) and the one at 5 (closed): open %v, closed %v; want open", open, closed)
	}
	change(9, "closed")
	if open, closed := state(); open != 0 || closed != 1 {
		t.Errorf("after a later change to closed: open %v, closed %v", open, closed)
	}
}
