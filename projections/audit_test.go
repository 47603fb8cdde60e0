package projections_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
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

// An open chunk's segments hold the newest items of their list, each once,
// and a chunk that fills is sealed: stored whole, its segments deleted in
// the same batch. Folded live (batches committed without a sync) and by
// catch-ups, in chunks of four items, with clean restarts and crashes that
// lose a random part of what was not synced (between a list's segments and
// the seal that replaces them, between a chunk and its amendments): each
// query lists every entry once, with its outcome; each category's list is
// stored as full sealed chunks and at most four items in segments (a full
// chunk is sealed by the next item), each index list (a session's, an
// agent's, an outcome's) as chunks of at most four postings written once,
// and every list has its entries or postings in stream order; and
// the store verifies clean against a rebuild. Tool results come late, after their call's chunk was sealed and
// written, so that entries are amended.
func TestAuditSegmentsAcrossCrashes(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
		f.Value.Set("20") // each check folds on a real broker; keep the suite quick
		defer f.Value.Set("100")
	}
	projections.SetAuditChunkItems(t, 4)
	b := brokertest.StartMutable(t)
	log := events.New(b.JetStream())
	ctx, cancel := context.WithTimeout(context.Background(), 5*brokertest.Timeout)
	defer cancel()
	amended := 0
	rapid.Check(t, func(rt *rapid.T) {
		purge(ctx, rt, b)
		sessions := []string{"S1", "S2"}
		var envs []*schemas.Envelope
		add := func(s string, typ schemas.Type, source string, p any) {
			env, err := schemas.New(typ, s, source, "", base.Add(time.Duration(len(envs))*time.Second), p)
			if err != nil {
				rt.Fatal(err)
			}
			envs = append(envs, env)
		}
		// By the index of the entry's event (from 1): the stream's sequences
		// go on after a purge.
		want := map[uint64]string{} // entry -> outcome
		entries := map[string][]uint64{}
		for _, s := range sessions {
			add(s, schemas.TypeSessionCreate, "user", schemas.SessionCreate{Name: s})
			entries["s/"+s] = []uint64{uint64(len(envs))}
		}
		type call struct {
			id, session string
			seq         uint64
		}
		var calls []call
		for i := range rapid.IntRange(1, 60).Draw(rt, "events") {
			s := rapid.SampledFrom(sessions).Draw(rt, "session")
			seq := uint64(len(envs) + 1)
			switch k := rapid.IntRange(0, 2).Draw(rt, "kind"); {
			case k == 1:
				id := fmt.Sprintf("c%d", i)
				calls = append(calls, call{id, s, seq})
				add(s, schemas.TypeToolCall, "engineer", schemas.ToolCall{CallID: id, Tool: "exec", Args: map[string]any{"argv": []any{"make"}}})
				want[seq], entries["c/process"], entries["s/"+s] = schemas.OutcomeAllowed, append(entries["c/process"], seq), append(entries["s/"+s], seq)
			case k == 2 && len(calls) > 0:
				j := rapid.IntRange(0, len(calls)-1).Draw(rt, "call")
				c := calls[j]
				calls = append(calls[:j], calls[j+1:]...)
				ok := rapid.Bool().Draw(rt, "ok")
				add(c.session, schemas.TypeToolResult, "engineer", schemas.ToolResult{CallID: c.id, Tool: "exec", OK: ok, Error: "failed", DurationMS: 1})
				if !ok {
					want[c.seq] = schemas.OutcomeError
				}
			default:
				o := rapid.SampledFrom([]string{schemas.OutcomeAllowed, schemas.OutcomeDenied}).Draw(rt, "outcome")
				add(s, schemas.TypeAuditRecord, "tester", schemas.AuditRecord{Category: schemas.AuditFile, Action: "write", Outcome: o})
				want[seq], entries["c/file"], entries["s/"+s] = o, append(entries["c/file"], seq), append(entries["s/"+s], seq)
			}
		}

		cs := openCrashable(ctx, rt, 4)
		defer func() { cs.store.Close() }()
		var last uint64
		var appended []uint64
		for rest := envs; len(rest) > 0; {
			n := rapid.IntRange(1, min(len(rest), 6)).Draw(rt, "append")
			seqs, err := log.AppendBatch(ctx, rest[:n])
			if err != nil {
				rt.Fatalf("append: %v", err)
			}
			rest, last, appended = rest[n:], seqs[len(seqs)-1], append(appended, seqs...)
			cs.project(log, last)
			if r := rapid.IntRange(0, 2).Draw(rt, "restart"); r > 0 {
				cs.restart(r == 2)
			}
		}
		if got, err := cs.store.Projector(log).CatchUp(ctx); err != nil || got != last {
			rt.Fatalf("final catch up = %d, %v; want %d", got, err, last)
		}
		outcomes := map[uint64]string{}
		for i, o := range want {
			outcomes[appended[i-1]] = o
		}
		for list, is := range entries {
			for j, i := range is {
				is[j] = appended[i-1]
			}
			entries[list] = is
		}

		all, err := cs.store.Audit(ctx, projections.AuditQuery{Limit: 10_000})
		if err != nil {
			rt.Fatal(err)
		}
		got := map[uint64]string{}
		for i, e := range all {
			if i > 0 && e.Seq <= all[i-1].Seq {
				rt.Fatalf("entry %d at seq %d after seq %d: listed twice or out of order", i, e.Seq, all[i-1].Seq)
			}
			if e.Category != schemas.AuditSession {
				got[e.Seq] = e.Outcome
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(outcomes) {
			rt.Fatalf("entries by seq and outcome:\n got %v\nwant %v", got, outcomes)
		}
		for _, s := range sessions {
			es, err := cs.store.Audit(ctx, projections.AuditQuery{Session: s, Category: schemas.AuditProcess})
			if err != nil {
				rt.Fatal(err)
			}
			for _, e := range es {
				if e.Session != s || got[e.Seq] != e.Outcome {
					rt.Fatalf("session %s's process entries: seq %d of %s, %s; want %s", s, e.Seq, e.Session, e.Outcome, got[e.Seq])
				}
			}
		}

		lists, err := projections.AuditLists(cs.store)
		if err != nil {
			rt.Fatal(err)
		}
		for name, l := range lists {
			if !strings.HasPrefix(name, "audit/c/") {
				if slices.ContainsFunc(l.Sealed, func(n int) bool { return n > 4 }) || len(l.Segments) > 0 || l.Amends > 0 {
					rt.Fatalf("index list %q: chunks of %v items, segments of %v, %d amendments; want chunks of at most 4 and nothing else (written once, never changed)", name, l.Sealed, l.Segments, l.Amends)
				}
				continue
			}
			segmented := 0
			for _, n := range l.Segments {
				segmented += n
			}
			if slices.ContainsFunc(l.Sealed, func(n int) bool { return n != 4 }) || segmented > 4 {
				rt.Fatalf("list %q: sealed chunks of %v items and segments of %v; want chunks of 4 and at most 4 items in segments (a full chunk is sealed by the next item)", name, l.Sealed, l.Segments)
			}
			amended += l.Amends
		}
		for list, seqs := range entries {
			dim, value, _ := strings.Cut(list, "/")
			l := lists["audit/"+dim+"/"+value+"\x00"]
			if l == nil || fmt.Sprint(l.Seqs) != fmt.Sprint(seqs) {
				rt.Fatalf("list %s stores %+v; want the items %v", list, l, seqs)
			}
		}
		if _, err := cs.store.Verify(ctx, log); err != nil {
			rt.Fatalf("live fold with crashes differs from a clean rebuild: %v", err)
		}
	})
	if amended == 0 {
		t.Fatal("no check amended an entry of a sealed chunk")
	}
}
