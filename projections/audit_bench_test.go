package projections

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// auditStream is the audit's share of a rebuild's stream: sessions
// interleaved round-robin like projbench's, each a session start, an LLM
// call, eight tool calls each with its result a whole round of sessions
// later, a workflow's end and the session's, their payloads decoded once
// as a rebuild's projections share them.
func auditStream(b *testing.B, sessions int) []*event {
	var evs []*event
	add := eventAdder(b, &evs)
	for k := range 21 {
		for i := range sessions {
			s := fmt.Sprintf("bs%06d", i)
			call := fmt.Sprintf("call-%s-%d", s, (k-3)/2)
			switch {
			case k == 0:
				add(s, schemas.TypeSessionCreate, "user", schemas.SessionCreate{Name: s})
			case k == 1:
				add(s, schemas.TypeSessionResume, "user", schemas.SessionResume{})
			case k == 2:
				add(s, schemas.TypeLLMUsage, "architect", schemas.LLMUsage{CallID: "llm-" + s, Agent: "architect", Model: "bench-model", Usage: schemas.Usage{PromptTokens: 900, CompletionTokens: 120, TotalTokens: 1020}})
			case k < 19 && k%2 == 1:
				add(s, schemas.TypeToolCall, "engineer", schemas.ToolCall{CallID: call, Tool: "exec", DAGID: "dag-" + s, NodeID: "n", Attempt: 1})
			case k < 19:
				add(s, schemas.TypeToolResult, "engineer", schemas.ToolResult{CallID: call, Tool: "exec", OK: true, DurationMS: 412})
			case k == 19:
				add(s, schemas.TypeWorkflowComplete, "orchestrator", schemas.WorkflowComplete{DAGID: "dag-" + s, Outcome: schemas.OutcomeSucceeded, Succeeded: 8})
			default:
				add(s, schemas.TypeSessionComplete, "user", schemas.SessionComplete{Summary: "done"})
			}
		}
	}
	return evs
}

// BenchmarkAuditFold folds the audit's events of 4000 sessions into an empty
// store as a rebuild does (the key filter on, batches of 50,000 events, the
// objects written every 250,000). cpu-ns/event is the CPU time the folding
// thread spent an audit event, which a loaded machine changes less than the
// time.
// go test -run X -bench AuditFold -benchmem ./projections
func BenchmarkAuditFold(b *testing.B) {
	foldEvents(b, applyAudit, Audit, auditStream(b, 4000), 50_000, 250_000, true)
}

// BenchmarkAuditLive folds the same events as a live projector does: in
// batches of a few events, each written with the objects it changed, so
// every list's open chunk an event touched is encoded and written again
// at each batch. bytes/event is what the batches wrote an audit event.
// go test -run X -bench AuditLive -benchmem ./projections
func BenchmarkAuditLive(b *testing.B) {
	evs := auditStream(b, 400)
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { foldEvents(b, applyAudit, Audit, evs, n, n, false) })
	}
}

// eventAdder returns a function that appends an event to *evs, a
// millisecond after the one before, its payload decoded.
func eventAdder(b *testing.B, evs *[]*event) func(sid string, typ schemas.Type, source string, p any) {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func(sid string, typ schemas.Type, source string, p any) {
		env, err := schemas.New(typ, sid, source, "", ts.Add(time.Duration(len(*evs))*time.Millisecond), p)
		if err != nil {
			b.Fatal(err)
		}
		e := newEvent(&events.Event{Seq: uint64(len(*evs) + 1), Env: env})
		if _, err := e.decode(); err != nil {
			b.Fatal(err)
		}
		*evs = append(*evs, e)
	}
}

// foldEvents folds evs with apply (the fold of projection name) into an
// empty store in memory, in batches of batch events, the changed objects
// written every flush events (as a rebuild, with its key filter, when
// rebuild), and reports the folding thread's CPU time and the bytes written
// an event, and the live heap the fold's cached objects held at the end (the
// heap after a collection, less the heap once the cache is emptied) by
// session.
func foldEvents(b *testing.B, apply func(*tx, *event) error, name string, evs []*event, batch, flush int, rebuild bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	var live int64
	written := 0
	sessions := map[string]bool{}
	for _, e := range evs {
		sessions[e.env.SessionID] = true
	}
	for b.Loop() {
		b.StopTimer()
		db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
		if err != nil {
			b.Fatal(err)
		}
		c := newCache(DefaultCacheBytes)
		if rebuild {
			c = newCache(RebuildCacheBytes)
			c.written = newKeyFilter([][]byte{[]byte(name + "/")})
		}
		b.StartTimer()
		start := threadCPU(b)
		t := &tx{db: db, batch: db.NewBatch(), cache: c}
		for i, e := range evs {
			if err := apply(t, e); err != nil {
				b.Fatal(err)
			}
			if (i+1)%batch != 0 && i+1 != len(evs) {
				continue
			}
			if (i+1)%flush == 0 || i+1 == len(evs) {
				if _, err := c.flush(t.batch, nil); err != nil {
					b.Fatal(err)
				}
				c.markClean()
			}
			written += t.batch.Len()
			if err := t.batch.Commit(pebble.NoSync); err != nil {
				b.Fatal(err)
			}
			c.evict()
			t.batch = db.NewBatch()
		}
		b.StopTimer()
		cpu += threadCPU(b) - start
		live += liveHeap()
		c.reset()
		live -= liveHeap()
		t.batch.Close()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*len(evs)), "cpu-ns/event")
	b.ReportMetric(float64(written)/float64(b.N*len(evs)), "bytes/event")
	b.ReportMetric(float64(live)/float64(b.N*len(sessions)), "live-B/session")
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// threadCPU is the CPU time of the calling OS thread.
func threadCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
