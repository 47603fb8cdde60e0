package projections_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// Audit queries over chunked lists answer what a filter of every entry
// does: entries of several categories, sessions and agents, stamped by
// clocks out of order, tool calls completed by results that come later (in
// another batch, after their chunk sealed), folded in batches of random
// sizes with restarts between, in chunks of three items so that every list
// spans many chunks.
func TestAuditQueriesMatchAFilterOfEveryEntry(t *testing.T) {
	projections.SetAuditChunkItems(t, 3)
	w := newWorld(t)
	rng := rand.New(rand.NewPCG(15, 5))
	sessions := []string{"S1", "S2", "S3"}
	agents := []string{"engineer", "architect", "tester"}
	cats := []string{schemas.AuditFile, schemas.AuditProcess, schemas.AuditPermission, schemas.AuditConfig}
	outcomes := []string{schemas.OutcomeAllowed, schemas.OutcomeAllowed, schemas.OutcomeDenied, schemas.OutcomeError}
	var lines []string
	for _, s := range sessions {
		lines = append(lines, s+" session_create")
	}
	var open []string // tool calls without their result
	want := map[uint64]string{}
	for i := range 150 {
		at := len(lines) + 1 - rng.IntN(20) // clocks out of order
		s, a := sessions[rng.IntN(len(sessions))], agents[rng.IntN(len(agents))]
		switch {
		case rng.IntN(4) == 0:
			call := fmt.Sprintf("c%d", i)
			open = append(open, s+" "+call)
			lines = append(lines, fmt.Sprintf(`%s tool_call source=engineer at=%d {"call_id":%q,"tool":"exec","args":{"argv":["make"]}}`, s, max(at, 1), call))
			want[uint64(len(lines))] = schemas.OutcomeAllowed
		case len(open) > 0 && rng.IntN(3) == 0:
			j := rng.IntN(len(open))
			s, call, _ := strings.Cut(open[j], " ")
			open = slices.Delete(open, j, j+1)
			ok := rng.IntN(2) == 0
			lines = append(lines, fmt.Sprintf(`%s tool_result source=engineer {"call_id":%q,"tool":"exec","ok":%v,"exit_code":%d,"error":"failed","duration_ms":1}`, s, call, ok, map[bool]int{true: 0, false: 1}[ok]))
			if !ok {
				for seq, line := range lines {
					if strings.Contains(line, fmt.Sprintf("%q", call)) && strings.Contains(line, "tool_call") {
						want[uint64(seq+1)] = schemas.OutcomeError
					}
				}
			}
		default:
			o := outcomes[rng.IntN(len(outcomes))]
			lines = append(lines, fmt.Sprintf(`%s audit_record source=%s at=%d {"category":%q,"action":"x","outcome":%q}`, s, a, max(at, 1), cats[rng.IntN(len(cats))], o))
			want[uint64(len(lines))] = o
		}
	}
	for rest := lines; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(25))
		if out := w.appendLines(strings.Join(rest[:n], "\n")); strings.Contains(out, "error") {
			t.Fatal(out)
		}
		rest = rest[n:]
		if rng.IntN(3) == 0 {
			w.restart()
		}
	}

	all, err := w.store.Audit(w.ctx, projections.AuditQuery{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]string{}
	for i, e := range all {
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("entry %d at seq %d after seq %d: not in stream order", i, e.Seq, all[i-1].Seq)
		}
		if e.Category != schemas.AuditSession { // the sessions' creations
			got[e.Seq] = e.Outcome
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries by seq and outcome:\n got %v\nwant %v", got, want)
	}
	for i := range 300 {
		q := projections.AuditQuery{Limit: []int{0, 1, 2, 5, 17}[rng.IntN(5)]}
		pick := func(vs []string) string {
			if rng.IntN(2) == 0 {
				return ""
			}
			return vs[rng.IntN(len(vs))]
		}
		q.Category, q.Session, q.Agent, q.Outcome = pick(slices.Concat(cats, []string{schemas.AuditSession})), pick(sessions), pick(slices.Concat(agents, []string{"user"})), pick(outcomes)
		if rng.IntN(3) == 0 {
			q.Since = base.Add(time.Duration(rng.IntN(len(lines))) * time.Second)
		}
		if rng.IntN(3) == 0 {
			q.Until = base.Add(time.Duration(rng.IntN(len(lines))+1) * time.Second)
			if !q.Since.IsZero() && !q.Since.Before(q.Until) {
				q.Since = time.Time{}
			}
		}
		var want []uint64
		for _, e := range all {
			if (q.Category == "" || e.Category == q.Category) && (q.Session == "" || e.Session == q.Session) &&
				(q.Agent == "" || e.Agent == q.Agent) && (q.Outcome == "" || e.Outcome == q.Outcome) &&
				(q.Since.IsZero() || !e.At.Before(q.Since)) && (q.Until.IsZero() || e.At.Before(q.Until)) {
				want = append(want, e.Seq)
			}
		}
		limit := q.Limit
		if limit == 0 {
			limit = projections.DefaultAuditLimit
		}
		want = want[max(0, len(want)-limit):]
		es, err := w.store.Audit(w.ctx, q)
		if err != nil {
			t.Fatalf("query %d %+v: %v", i, q, err)
		}
		got := []uint64{}
		for _, e := range es {
			got = append(got, e.Seq)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("query %d %+v:\n got %v\nwant %v", i, q, got, want)
		}
	}
	if _, err := w.store.Verify(w.ctx, w.log); err != nil {
		t.Fatalf("the fold in batches differs from a rebuild: %v", err)
	}
}
