package runtime

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// The same node failing the same way in two sessions is one failure memory
// counted twice, and the second time the user is warned.
func TestFailureMemoryCountsAcrossSessions(t *testing.T) {
	r := newRig(t)
	const plan = `
name: flaky
nodes:
  - {id: migrate, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo 'lock held by pid 4242' >&2; exit 3"]}}
`
	for _, s := range []string{"S1", "S2"} {
		r.wait(r.submit(s, plan))
		brokertest.Eventually(t, 10*time.Second, "the failure recorded in "+s, func() bool {
			hs, err := r.store.History(r.ctx, projections.HistoryQuery{Session: s, CurrentOnly: true, Categories: []string{"failure"}})
			return err == nil && slices.ContainsFunc(hs, func(h *projections.HistoryEntry) bool { return h.Node == "migrate" })
		})
	}
	ms, err := r.store.Failures(r.ctx, projections.FailureQuery{Search: "exit status"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Count != 2 || !slices.Equal(ms[0].Sessions, []string{"S1", "S2"}) || ms[0].Level != "warn" ||
		ms[0].Approach != "engineer exec (node migrate)" {
		t.Fatalf("failure memory: %+v", ms)
	}
	brokertest.Eventually(t, 10*time.Second, "the warning", func() bool {
		for _, e := range r.events(events.Filter{Session: "S2", Type: schemas.TypeNotice}) {
			p, _ := schemas.PayloadAs[schemas.Notice](e)
			if p != nil && strings.Contains(p.Text, "failed the same way before") {
				return true
			}
		}
		return false
	})
	if ns := r.events(events.Filter{Session: "S1", Type: schemas.TypeNotice}); slices.ContainsFunc(ns, func(e *schemas.Envelope) bool {
		p, _ := schemas.PayloadAs[schemas.Notice](e)
		return p != nil && strings.Contains(p.Text, "failed the same way")
	}) {
		t.Fatal("the first failure warned")
	}
}
