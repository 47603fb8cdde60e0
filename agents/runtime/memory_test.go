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

// The same node failing the same way in five sessions is one failure
// memory counted five times, readable from every session: the second time
// the user is warned, and the fifth told to try another approach.
func TestFailureMemoryCountsAcrossSessions(t *testing.T) {
	r := newRig(t)
	const plan = `
name: flaky
nodes:
  - {id: migrate, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo 'lock held by pid 4242' >&2; exit 3"]}}
`
	sessions := []string{"S1", "S2", "S3", "S4", "S5"}
	for i, s := range sessions {
		r.wait(r.submit(s, plan))
		brokertest.Eventually(t, 10*time.Second, "the failure recorded in "+s, func() bool {
			hs, err := r.store.History(r.ctx, projections.HistoryQuery{Session: s, CurrentOnly: true, Categories: []string{"failure"}})
			return err == nil && slices.ContainsFunc(hs, func(h *projections.HistoryEntry) bool { return h.Node == "migrate" })
		})
		ms, err := r.store.Failures(r.ctx, projections.FailureQuery{Search: "exit status"})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]string{1: "", 2: "warn", 3: "warn", 4: "warn", 5: "change_approach"}[i+1]
		if len(ms) != 1 || ms[0].Count != i+1 || !slices.Equal(ms[0].Sessions, sessions[:i+1]) || ms[0].Level != want ||
			ms[0].Approach != "engineer exec (node migrate)" {
			t.Fatalf("failure memory after %s: %+v, want count %d at level %q", s, ms, i+1, want)
		}
	}
	notices := func(s string) []string {
		var out []string
		for _, e := range r.events(events.Filter{Session: s, Type: schemas.TypeNotice}) {
			if p, _ := schemas.PayloadAs[schemas.Notice](e); p != nil && strings.Contains(p.Text, "engineer exec (node migrate)") {
				out = append(out, p.Text+" | "+p.Hint)
			}
		}
		return out
	}
	brokertest.Eventually(t, 10*time.Second, "the warning and the suggestion", func() bool {
		return len(notices("S2")) == 1 && len(notices("S5")) == 1
	})
	if n := notices("S2")[0]; !strings.Contains(n, "failed the same way before") {
		t.Errorf("the second failure's notice: %q", n)
	}
	if n := notices("S5")[0]; !strings.Contains(n, "has failed 5 times") || !strings.Contains(n, "try another approach") {
		t.Errorf("the fifth failure's notice: %q", n)
	}
	for _, s := range []string{"S1", "S3", "S4"} {
		if ns := notices(s); len(ns) != 0 {
			t.Errorf("%s was told %q", s, ns)
		}
	}
}
