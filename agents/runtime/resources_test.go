package runtime

import (
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// The tool process pool spans every session: background work waits once it
// would take the user's reserve, and the user's own DAG runs meanwhile.
func TestUserWorkTakesTheReservedToolSlot(t *testing.T) {
	pool, err := tools.NewPool(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, func(c *Config) { c.Tools.Pool = pool })
	bg := r.submit("BG", `
name: background
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: [sleep, "60"]}}
  - {id: b, agent: tester, tool: exec, args: {argv: [sleep, "60"]}}
`)
	brokertest.Eventually(t, 30*time.Second, "one background tool running, the other waiting", func() bool {
		u := pool.Usage()
		return u.Other == 1 && u.WaitingOther == 1
	})
	user := r.submit("U", `
name: mine
nodes:
  - {id: now, agent: engineer, tool: exec, args: {argv: ["true"]}}
`, func(e *schemas.Envelope) { e.Priority = schemas.PriorityUserInteractive })
	if dag := r.wait(user); dag.State != projections.DAGSucceeded {
		t.Fatalf("the user's DAG: %s", dag.State)
	}
	if u := pool.Usage(); u.Other != 1 || u.WaitingOther != 1 {
		t.Fatalf("the background DAG moved while the user's ran: %+v", u)
	}
	cancel, _ := schemas.New(schemas.TypeSignal, "BG", "user", "orchestrator", time.Now(), schemas.Signal{Action: schemas.SignalCancel, Scope: schemas.ScopeSession})
	r.append(cancel)
	if dag := r.wait(bg); dag.State != projections.DAGCancelled {
		t.Fatalf("the background DAG after a cancel: %s", dag.State)
	}
}
