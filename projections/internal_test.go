package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

func appendSession(t *testing.T, ctx context.Context, log *events.Log, id string) uint64 {
	t.Helper()
	var last uint64
	for _, e := range []struct {
		typ schemas.Type
		p   any
	}{{schemas.TypeSessionCreate, schemas.SessionCreate{Name: id}}, {schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: "d", Nodes: []schemas.Node{{ID: "a"}}}}}} {
		env, err := schemas.New(e.typ, id, "user", "", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), e.p)
		if err != nil {
			t.Fatal(err)
		}
		if last, err = log.Append(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	return last
}

func setup(t *testing.T) (context.Context, *events.Log, vfs.FS, *Store) {
	b := brokertest.Start(t, brokertest.Options(t))
	log := events.New(b.JetStream())
	ctx := brokertest.Context(t)
	fs := vfs.NewMem()
	s, err := Open(ctx, Options{Dir: "/p", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, log, fs, s
}

// reopen closes s and opens the store in /p again, closed when the test ends.
func reopen(t *testing.T, ctx context.Context, fs vfs.FS, s *Store) *Store {
	t.Helper()
	s.Close()
	s, err := Open(ctx, Options{Dir: "/p", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A projection whose stored version is not the current one is dropped on
// Open and rebuilt alone; the others keep their state and cursors.
func TestChangedVersionRebuildsThatProjection(t *testing.T) {
	ctx, log, fs, s := setup(t)
	seq := appendSession(t, ctx, log, "S1")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(versionKey(DAGs), []byte("0"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, ctx, fs, s)
	c := s.cursorsCopy()
	if c[DAGs] != 0 || c[Sessions] != seq {
		t.Fatalf("cursors after a version change of dags: %v; want dags 0, sessions %d", c, seq)
	}
	if _, err := s.SessionDAG(ctx, "S1", "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dag kept across a version change: %v", err)
	}
	if got, err := s.Projector(log).CatchUp(ctx); err != nil || got != seq {
		t.Fatalf("CatchUp = %d, %v", got, err)
	}
	if _, err := s.SessionDAG(ctx, "S1", "d"); err != nil {
		t.Fatal(err)
	}
	// The sessions projection was not folded again.
	checkFoldedOnce(t, ctx, log, s)
}

// A rebuild's drop leaves no table of the old store behind: only the mark,
// which the rebuild then folds around. Left in their tables under range
// deletions, the old keys were merged into every compaction of the rebuild.
// Without a write-ahead log the mark is in a table (durable) before anything
// is dropped.
func TestRebuildDropLeavesNoOldTable(t *testing.T) {
	for _, noWAL := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoWAL=%v", noWAL), func(t *testing.T) {
			ctx, log, fs, s := setup(t)
			seq := appendSession(t, ctx, log, "S1")
			if _, err := s.Projector(log).CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			s.Close()
			s, err := Open(ctx, Options{Dir: "/p", FS: fs, NoWAL: noWAL})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.dropAll(); err != nil {
				t.Fatal(err)
			}
			tables, err := s.db.SSTables()
			if err != nil {
				t.Fatal(err)
			}
			marked := false
			for _, level := range tables {
				for _, tb := range level {
					lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey
					if !bytes.Equal(lo, rebuildKey) || !bytes.Equal(hi, rebuildKey) {
						t.Errorf("a table [%q, %q] is left after the drop", lo, hi)
					}
					marked = true
				}
			}
			if noWAL && !marked {
				t.Error("without a log, the rebuild mark is in no table after the drop")
			}
			if v, err := s.get(sessionKey("S1")); err != nil || v != nil {
				t.Fatalf("the session after the drop: %q, %v", v, err)
			}
			if err := s.Projector(log).Rebuild(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if s.Cursor() != seq {
				t.Fatalf("cursor after the rebuild: %d, want %d", s.Cursor(), seq)
			}
			checkFoldedOnce(t, ctx, log, s)
		})
	}
}

// The objects a batch changes count against the cache's budget as they
// change: a batch of many distinct changed objects ends, and writes them,
// once they count for half of it, not at BatchEvents. A rebuild of 5M
// events, whose batches wrote them only at their end, held 251,000 past a
// cache of 150,000 objects.
func TestBatchEndsWhenItsChangedObjectsFillHalfTheBudget(t *testing.T) {
	ctx, log, fs, s := setup(t)
	var last uint64
	for i := range 300 {
		last = appendSession(t, ctx, log, fmt.Sprintf("S%d", i))
	}
	s.Close()
	const budget = 32 << 10
	s, err := Open(ctx, Options{Dir: "/p", FS: fs, CacheBytes: budget, BatchEvents: 1 << 20, BatchDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var done []uint64
	if err := s.Projector(log).Rebuild(ctx, func(p Progress) { done = append(done, p.Done) }); err != nil {
		t.Fatal(err)
	}
	// Each event creates an object (a session, a DAG) of its own, which
	// counts for at least this much.
	most := uint64(budget/2/(entryBytes+newObjectBytes) + 1)
	prev := uint64(0)
	for _, d := range done {
		if d-prev > most {
			t.Fatalf("a batch of %d events, each changing an object of its own, under a budget of %d bytes: want at most %d", d-prev, budget, most)
		}
		prev = d
	}
	if prev != last {
		t.Fatalf("%d events folded, want %d", prev, last)
	}
	checkFoldedOnce(t, ctx, log, s)
}

// checkFoldedOnce checks that s refused no event (one folded twice, a second
// session_create, would be) and matches a rebuild from log.
func checkFoldedOnce(t *testing.T, ctx context.Context, log *events.Log, s *Store) {
	t.Helper()
	if rs, _ := s.Rejections(ctx, RejectionFilter{}); len(rs) != 0 {
		t.Fatalf("rejections: %s", rs[0].Reason)
	}
	if _, err := s.Verify(ctx, log); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyReportsTheFirstDifference(t *testing.T) {
	ctx, log, _, s := setup(t)
	appendSession(t, ctx, log, "S1")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, log); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(sessionKey("S1"), []byte(`{"id":"S1","state":"failed"}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Verify(ctx, log)
	if !errors.Is(err, ErrVerify) || rep.Difference == nil || !strings.Contains(rep.Difference.Key, "sessions/s/S1") {
		t.Fatalf("Verify after tampering = %+v, %v", rep, err)
	}
	if err := s.db.Set([]byte("sessions/s/ZZ"), []byte(`{}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Set(sessionKey("S1"), nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, log); !errors.Is(err, ErrVerify) {
		t.Fatalf("Verify with an extra key = %v", err)
	}
}

// objectsCache returns a cache of the budget of n test objects: strings,
// not yet written, under keys of keyLen bytes.
func objectsCache(n, keyLen int) *cache {
	return newCache(int64(n * (entryBytes + keyLen + newObjectBytes)))
}

func TestCacheEvictsCleanObjectsOnly(t *testing.T) {
	c := objectsCache(2, 1)
	for _, k := range []string{"a", "b"} {
		c.put([]byte(k), &k, true)
	}
	c.markClean()
	c.evict()
	c.get([]byte("a")) // b is now the least recently used
	x := "x"
	c.put([]byte("c"), &x, false)
	c.evict()
	if _, ok := c.get([]byte("c")); ok {
		t.Fatal("an object that came in when the cache was full and was not used again was kept")
	}
	c.put([]byte("d"), &x, true)
	c.put([]byte("e"), &x, true)
	c.put([]byte("f"), &x, true)
	if len(c.dirty) != 3 || len(c.m) != 5 {
		t.Fatalf("dirty %d, cached %d: dirty objects must stay until committed", len(c.dirty), len(c.m))
	}
	c.markClean()
	c.evict()
	if len(c.m) != 2 {
		t.Fatalf("%d objects cached, want 2", len(c.m))
	}
	for _, k := range []string{"a", "b"} {
		if _, ok := c.get([]byte(k)); !ok {
			t.Fatalf("%s, cached before the cache was full, was evicted before the newcomers", k)
		}
	}
}

// A key written at every flush enters the fold's key filter once, and again
// into the filter of the next fold: a filter that missed it would answer
// that the stored key is absent, and a load would skip it.
func TestFlushAddsAKeyToEachFilterOnce(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newCache(10)
	x := "x"
	k := []byte("session/s1")
	flush := func(f *keyFilter) *entry {
		t.Helper()
		e := c.put(k, &x, true)
		b := db.NewBatch()
		defer b.Close()
		if _, err := c.flush(b, nil); err != nil {
			t.Fatal(err)
		}
		c.markClean()
		if !e.filtered || f.absent(k) {
			t.Fatal("a written key is not in the fold's filter")
		}
		return e
	}
	first := newKeyFilter([][]byte{[]byte("session/")})
	c.setFilter(first)
	e := flush(first)
	if flush(first) != e {
		t.Fatal("the key left the cache")
	}
	second := newKeyFilter([][]byte{[]byte("session/")})
	c.setFilter(second)
	if e.filtered {
		t.Fatal("a cached key counts as in a new filter")
	}
	flush(second)
}

// foldInTurns folds events over keys objects in strict rotation, as a
// rebuild of sessions all running at once does: each event loads (or
// finds) its object and changes it, evict runs after each batch, and the
// changed objects are written when they are half the cache.
func foldInTurns(c *cache, keys, events, batch int) (hits int) {
	x := "x"
	for ev := range events {
		k := []byte(fmt.Sprintf("dag/%07d", ev%keys))
		e, ok := c.get(k)
		if ok {
			hits++
		} else {
			e = c.put(k, &x, false)
		}
		c.update(e, &x)
		if (ev+1)%batch == 0 {
			c.evict()
			if c.heldFull() {
				c.markClean()
			}
		}
	}
	return hits
}

// Objects met in turn, more of them than the cache holds: the least
// recently used is always the next one needed, so evicting it made the
// cache miss at every read (a rebuild of 5M generated events, 100,000
// sessions at once). The objects that came in first stay instead.
func TestCacheHitsObjectsTakingTurns(t *testing.T) {
	for _, keys := range []int{1_500, 2_000, 4_000} {
		c := objectsCache(1_000, len("dag/0000000"))
		events := 40 * keys
		hits := foldInTurns(c, keys, events, 50)
		// The held changed objects take up to half the cache, so about
		// half of it stays for the objects that came in first.
		if want := events * 500 / keys * 8 / 10; hits < want {
			t.Errorf("%d objects in turn through a cache of 1,000: %d hits of %d reads, want at least %d", keys, hits, events, want)
		}
	}
}

// A cache full of objects no longer used still takes in the objects in
// use: one used again in a later batch, and one loaded again soon after it
// was evicted.
func TestCacheAdmitsObjectsInUse(t *testing.T) {
	c := objectsCache(100, len("old/00"))
	x := "x"
	for i := range 100 {
		c.put(fmt.Appendf(nil, "old/%02d", i), &x, false)
	}
	hot := func(i int) []byte { return fmt.Appendf(nil, "hot/%02d", i) }
	miss := 0
	for batch := range 20 {
		// Keys 0-9 are used in every batch, 10-19 in every third.
		for i := range 20 {
			if i >= 10 && batch%3 != 0 {
				continue
			}
			e, ok := c.get(hot(i))
			if !ok {
				miss++
				e = c.put(hot(i), &x, false)
			}
			c.update(e, &x)
		}
		c.evict() // as a fold does: before the batch's objects are written
		c.markClean()
	}
	if miss != 20 {
		t.Fatalf("%d misses, want 20: one a key", miss)
	}

	// h is loaded into the full cache and not changed; the changed objects
	// that came in after it cannot leave before they are written, so h does.
	h := []byte("h")
	c.put(h, &x, false)
	for i := range 150 {
		c.put(fmt.Appendf(nil, "new/%d", i), &x, true)
	}
	c.evict()
	if _, ok := c.m["h"]; ok {
		t.Fatal("h stayed")
	}
	if e := c.put(h, &x, false); e.probation {
		t.Fatal("h, evicted on probation and loaded again, is on probation again")
	}
}

// A DAG finds its nodes by a scan up to indexedNodes nodes and through a
// map above: both find the first node of an id, and the frontier derived
// from either is the same.
func TestDAGFindsNodesWithAndWithoutIndex(t *testing.T) {
	for _, n := range []int{indexedNodes, indexedNodes + 1, 40} {
		d := &DAG{ID: "d", Session: "s"}
		for i := range n {
			nd := &Node{ID: fmt.Sprintf("n%d", i), State: NodePending}
			if i > 0 {
				nd.DependsOn = []string{fmt.Sprintf("n%d", i-1)}
			}
			d.Nodes = append(d.Nodes, nd)
			d.Layers = append(d.Layers, []string{nd.ID})
		}
		d.Nodes = append(d.Nodes, &Node{ID: "n0", State: NodePending}) // a duplicate id
		o := newDAGObj(d)
		if (o.index != nil) != (len(d.Nodes) > indexedNodes) {
			t.Fatalf("%d nodes: indexed %v", len(d.Nodes), o.index != nil)
		}
		for i := range n {
			if j, ok := o.indexOf(fmt.Sprintf("n%d", i)); !ok || j != i {
				t.Fatalf("%d nodes: n%d at %d, %v", len(d.Nodes), i, j, ok)
			}
			if i > 0 && !slices.Equal(o.f.dependentsOf(i-1), []int32{int32(i)}) {
				t.Fatalf("%d nodes: dependents of n%d = %v", len(d.Nodes), i-1, o.f.dependentsOf(i-1))
			}
		}
		if _, ok := o.indexOf("absent"); ok {
			t.Fatal("found an absent node")
		}
	}
}

func TestPlanLayersByLongestPath(t *testing.T) {
	d := schemas.DAG{ID: "d", Nodes: []schemas.Node{
		{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}, {ID: "c"}, {ID: "d", DependsOn: []string{"b", "c"}}, {ID: "e", DependsOn: []string{"a"}},
	}}
	layers, layerOf, problems := Plan(d)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if got := fmtLayers(layers); got != "[[a c] [b e] [d]]" {
		t.Fatalf("layers = %s, want [[a c] [b e] [d]]", got)
	}
	if layerOf["d"] != 2 {
		t.Fatalf("layer of d = %d", layerOf["d"])
	}
}

func fmtLayers(l [][]string) string {
	var b strings.Builder
	b.WriteString("[")
	for i, layer := range l {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString("[" + strings.Join(layer, " ") + "]")
	}
	b.WriteString("]")
	return b.String()
}

// sampleNodes are nodes of every shape: plain, every field set (with a
// string that needs escapes), and partial results.
func sampleNodes() []*Node {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	utc := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	full := func(id, prompt string) *Node {
		return &Node{ID: id, Agent: "engineer", Tool: "exec", Prompt: prompt, DependsOn: []string{"a", "c"}, Layer: 2, State: NodeSucceeded,
			Attempt: 3, Result: &NodeResult{Summary: "ok", Evidence: "PASS", CallID: "c1", Seq: 1<<64 - 1}, LastError: "boom", Retryable: true,
			Help: "stuck", SkipReason: "why", Calls: []Call{{ID: "c1", Tool: "exec", Attempt: 1, Seq: 4, ResultSeq: 5, OK: true}, {ID: "c2"}},
			DispatchedAt: &at, StartedAt: &utc, FinishedAt: &at}
	}
	return []*Node{
		{ID: "a", State: NodeReady},
		full("b", "say \"hi\" <&> \\ \n\t\x01 é \u2028 \xff end"),
		full("e", "plain words"),
		{ID: "c", State: NodeFailed, Attempt: -1, Result: &NodeResult{Seq: 1}, DependsOn: []string{"unknown"}},
		{ID: "d", State: NodeSkipped, Result: &NodeResult{Evidence: "only evidence", Seq: 2}, StartedAt: &at},
	}
}

// A DAG reads back from its stored values as it was, with its layers, its
// checkpointed layers and nodes of every shape, in one value or in chunks;
// a damaged value is an error, never a partial DAG.
func TestDAGValueRoundTrip(t *testing.T) {
	for _, n := range []int{5, dagChunk, dagChunk + 1, 3*dagChunk + 7} {
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		d := &DAG{ID: "d", Session: "s", Name: "n", State: DAGRunning, Policy: schemas.Policy{MaxConcurrency: 2},
			LastStatus: &schemas.DAGStatus{DAGID: "d", Counts: map[string]int{"ready": 1}}, CreatedSeq: 9, CreatedAt: at}
		samples := sampleNodes()
		for i := range n {
			nd := *samples[i%len(samples)]
			if i >= len(samples) {
				nd.ID = fmt.Sprintf("n%d", i)
			}
			nd.Layer = i % 3
			d.Nodes = append(d.Nodes, &nd)
		}
		d.Layers = make([][]string, 3)
		for l := range 3 { // each layer lists its nodes backwards
			for i := n - 1; i >= 0; i-- {
				if d.Nodes[i].Layer == l {
					d.Layers[l] = append(d.Layers[l], d.Nodes[i].ID)
				}
			}
		}
		o := newDAGObj(d)
		o.f.checkpointed = 2
		o.touchAll()
		db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		b := db.NewBatch()
		if err := o.encode(b, dagKey("s", "d"), &scratch{}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(nil); err != nil {
			t.Fatal(err)
		}
		got, err := readDAGObj(db, "s", "d")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.dag(), d) || got.f.checkpointed != 2 {
			t.Fatalf("%d nodes: read back\n%+v\nwant\n%+v", n, got.dag(), d)
		}
		snap := &DAGSnapshot{snap: db.NewSnapshot(), sid: "s", dag: "d"}
		for i := range n {
			if got, err := snap.Node(i); err != nil || !reflect.DeepEqual(got, d.Nodes[i]) {
				t.Fatalf("%d nodes: node %d read back as %+v, %v", n, i, got, err)
			}
		}
		for _, i := range []int{n, -1} {
			if _, err := snap.Node(i); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%d nodes: node %d: %v", n, i, err)
			}
		}
		if err := snap.Close(); err != nil {
			t.Fatal(err)
		}
		// A node event rewrites the value of the node's chunk alone (and the
		// frontier).
		got.indexNodes()
		got.prepare()
		got.nodes[n-1].attempt++
		got.touchNode(n - 1)
		b = db.NewIndexedBatch()
		if err := got.encode(b, dagKey("s", "d"), &scratch{}); err != nil {
			t.Fatal(err)
		}
		chunk := dagKey("s", "d")
		if c := (n - 1) / dagChunk; c > 0 {
			chunk = appendDAGChunkKey(nil, "s", "d", c)
		}
		if _, closer, err := b.Get(chunk); b.Count() != 2 || err != nil {
			t.Fatalf("%d nodes: a node event wrote %d keys (its chunk's: %v), want its chunk and the frontier", n, b.Count(), err)
		} else {
			closer.Close()
		}
		if err := b.Commit(nil); err != nil {
			t.Fatal(err)
		}
		d.Nodes[n-1].Attempt++
		if again, err := readDAGObj(db, "s", "d"); err != nil || !reflect.DeepEqual(again.dag(), d) {
			t.Fatalf("%d nodes: after a node event read back %v", n, err)
		}
		v, closer, err := db.Get(dagKey("s", "d"))
		if err != nil {
			t.Fatal(err)
		}
		full := slices.Clone(v)
		closer.Close()
		for _, bad := range [][]byte{full[:len(full)-1], append(slices.Clone(full), 0), full[:len(full)/2]} {
			if err := db.Set(dagKey("s", "d"), bad, nil); err != nil {
				t.Fatal(err)
			}
			if o, err := readDAGObj(db, "s", "d"); err == nil {
				t.Fatalf("%d nodes: a damaged value of %d bytes of %d read back as %d nodes", n, len(bad), len(full), len(o.nodes))
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// An audit entry reads back as it was stored, and a damaged one is an error
// that says so, never a partial entry.
func TestAuditEntryRoundTrip(t *testing.T) {
	e := &AuditEntry{Seq: 42, ID: "e1", Type: schemas.TypeToolCall, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Category: schemas.AuditProcess, Action: "exec", Session: "S1", Agent: "engineer", Target: "go test ./...",
		Outcome: schemas.OutcomeError, Reason: "exit status 1", Details: map[string]string{"call": "c1", "exit_code": "1", "node": "d/a"}}
	// An event id is stored as its 16 bytes, known words as their index,
	// anything else as it is (an id in upper case too).
	uuid := &AuditEntry{Seq: 7, ID: "01a21e97-9f0c-7ead-8685-46ae2e8d899a", Type: schemas.TypeLLMUsage, At: e.At,
		Category: schemas.AuditLLM, Action: "call", Session: "S1", Agent: "architect", Target: "01A21E97-9F0C-7EAD-8685-46AE2E8D899A",
		Outcome: schemas.OutcomeAllowed, Details: map[string]string{"tokens": "1", "weird": "01a21e97-9f0c-7ead-8685-46ae2e8d899"}}
	appendAuditEntry := func(b []byte, e *AuditEntry) []byte {
		r := recordOf(e)
		return appendAuditRecord(b, &r)
	}
	for _, e := range []*AuditEntry{e, uuid} {
		v := appendAuditEntry(nil, e)
		got, err := decodeAuditEntry(v)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("decoded %+v, %v; want %+v", got, err, e)
		}
		if again := appendAuditEntry(nil, got); !bytes.Equal(again, v) {
			t.Fatal("the same entry encodes to different bytes")
		}
	}
	for s, want := range map[string]int{uuid.ID: 17, "tool_call": 1, uuid.Target: 38, "": 1} {
		if n := len(appendAuditWord(nil, s)); n != want {
			t.Errorf("%q stored in %d bytes, want %d", s, n, want)
		}
	}
	v := appendAuditEntry(nil, e)
	for _, bad := range [][]byte{nil, {0}, v[:len(v)-1], append(slices.Clone(v), 7), {auditEntryFormat, 1, 2, 0xff},
		{auditEntryFormat, 1, 2, 0xfd, 0x7f}, {auditEntryFormat, 1, 2, auditUUID, 1, 2}, {auditEntryFormat, 1, 2, 3}} {
		if got, err := decodeAuditEntry(bad); err == nil || got != nil {
			t.Errorf("%x: %+v, %v; want an error", bad, got, err)
		}
	}
}

// The fold's records keep their details in an array, numbers as numbers: a
// record stores the bytes of the entry whose details are the same strings
// in a map, whatever order its details were set in (a path's as the
// string it joins).
func TestAuditRecordStoresAsItsEntry(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	e := &AuditEntry{Seq: 42, ID: "01a21e97-9f0c-7ead-8685-46ae2e8d899a", Type: schemas.TypeToolCall, At: at,
		Category: schemas.AuditProcess, Action: "exec", Session: "S1", Agent: "engineer", Target: "go test ./...",
		Outcome: schemas.OutcomeError, Reason: "exit status 1", Details: map[string]string{"call": "c1", "exit_code": "-1",
			"node": "d/a", "result_seq": "18446744073709551615", "duration_ms": "9223372036854775807", "signal": "KILL"}}
	r := auditRecord{seq: e.Seq, at: at.UnixNano(), id: e.ID, typ: e.Type, category: e.Category, action: e.Action,
		session: e.Session, agent: e.Agent, target: e.Target, outcome: e.Outcome, reason: e.Reason}
	r.path("node", "d", "a") // stored as the joined string
	r.text("call", "c0")
	r.uint("result_seq", math.MaxUint64)
	r.int("exit_code", -1)
	r.int("duration_ms", math.MaxInt64)
	r.text("signal", "KILL")
	r.text("call", "c1") // set again: replaced
	want := recordOf(e)
	if got, want := appendAuditRecord(nil, &r), appendAuditRecord(nil, &want); !bytes.Equal(got, want) {
		t.Fatalf("record stored as\n%x\nits entry as\n%x", got, want)
	}
	if r.detail("call") != "c1" || r.detail("none") != "" {
		t.Fatalf("details %+v", r.details[:r.n])
	}
	// A path with an empty part keeps its slash, as the joined string does.
	for _, p := range [][2]string{{"d", ""}, {"", "a"}, {"", ""}} {
		var path, joined auditRecord
		path.path("node", p[0], p[1])
		joined.text("node", p[0]+"/"+p[1])
		if got, want := appendAuditRecord(nil, &path), appendAuditRecord(nil, &joined); !bytes.Equal(got, want) {
			t.Errorf("path %q stored as\n%x\nits joined string as\n%x", p, got, want)
		}
	}
}

// A waiting call keeps its entry stored, not its record: before its result
// it stores the entry its record does, and completed by its result the
// entry of the record with the result's outcome and details, the call's
// among them in name order (a result's detail replaces the call's of the
// same name), whether the call was made now or read back from its record.
func TestAuditCallStoresAsItsRecord(t *testing.T) {
	call := auditRecord{seq: 42, at: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), id: "01a21e97-9f0c-7ead-8685-46ae2e8d899a",
		typ: schemas.TypeToolCall, category: schemas.AuditProcess, action: "exec", session: "S1", agent: "engineer",
		target: strings.Repeat("a long command line ", 20), outcome: schemas.OutcomeAllowed}
	call.text("call", "c1")
	call.text("node", "d/a")
	result := func(r *auditRecord, ok bool) {
		r.int("exit_code", -1)
		r.int("duration_ms", 412)
		r.uint("result_seq", 77)
		r.text("signal", "KILL")
		if !ok {
			r.outcome, r.reason = schemas.OutcomeError, "exit status 1"
		}
	}
	for _, c := range []struct {
		name string
		call auditRecord
	}{{"two details", call}, {"none", auditRecord{seq: 1, category: schemas.AuditFile, outcome: schemas.OutcomeAllowed}}} {
		made := newAuditCall(3, nil, &c.call)
		stored := made.appendEntry(binary.AppendUvarint(nil, made.chunk), nil)
		back, err := decodeAuditCall(stored)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, ok := range []bool{true, false} {
			whole := c.call
			result(&whole, ok)
			var res auditRecord
			res.outcome, res.reason = made.outcome()
			result(&res, ok)
			want := appendAuditRecord(nil, &whole)
			for _, call := range []*auditCall{made, back} {
				if got := call.appendEntry(nil, &res); !bytes.Equal(got, want) {
					t.Fatalf("%s, ok %v: completed entry\n%x\nwant\n%x", c.name, ok, got, want)
				}
			}
		}
		if got, want := back.appendEntry(nil, nil), appendAuditRecord(nil, &c.call); !bytes.Equal(got, want) || back.chunk != 3 {
			t.Fatalf("%s: a call read back stores\n%x\nwant\n%x", c.name, got, want)
		}
	}
	// A result detail named as one of the call's replaces it.
	made := newAuditCall(3, nil, &call)
	var res auditRecord
	res.outcome = schemas.OutcomeAllowed
	res.text("node", "d/b")
	whole := call
	whole.text("node", "d/b")
	if got, want := made.appendEntry(nil, &res), appendAuditRecord(nil, &whole); !bytes.Equal(got, want) {
		t.Fatalf("a result's detail of the call's name: entry\n%x\nwant\n%x", got, want)
	}
}

// An audit chunk reads back as it was stored, item by item, and a damaged
// one is an error, never a partial chunk.
func TestAuditChunkRoundTrip(t *testing.T) {
	c := &auditChunk{first: 7, hw: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano()}
	c.add(7, []byte("entry"))
	c.add(9, nil)
	c.add(12, []byte("x"))
	c.set(0, []byte("completed")) // its old bytes are left out
	v := appendAuditChunk(nil, c.first, c.hw, c, 0, len(c.items))
	got, err := decodeAuditChunk(slices.Clone(v))
	if err != nil {
		t.Fatal(err)
	}
	if again := appendAuditChunk(nil, got.first, got.hw, got, 0, len(got.items)); !bytes.Equal(again, v) || got.first != c.first || got.hw != c.hw {
		t.Fatalf("decoded %+v, stored again as %q; want %q", got, again, v)
	}
	for i, want := range []string{"completed", "", "x"} {
		if b := got.bytes(i); string(b) != want {
			t.Fatalf("item %d: %q, want %q", i, b, want)
		}
	}
	if i, ok := got.find(9); !ok || i != 1 {
		t.Fatalf("find(9) = %d, %v; want 1, true", i, ok)
	}
	if _, ok := got.find(8); ok {
		t.Fatal("find(8) found an item no entry has")
	}
	for _, bad := range [][]byte{nil, {auditEntryFormat}, v[:len(v)-1], append(slices.Clone(v), 7)} {
		if got, err := decodeAuditChunk(bad); err == nil || got != nil {
			t.Errorf("%x: %+v, %v; want an error", bad, got, err)
		}
	}
}

// A TermCounter counts what TermCounts counts, text after text (a text
// of more terms than its table starts with, one larger than the table it
// keeps, and small ones after them), and CountOnce counts each distinct term
// of its text once. A TermVocab numbers the terms of all the texts once
// (its table grows past its first size), so each text's refs read back as
// its counts.
func TestTermCounter(t *testing.T) {
	var c TermCounter
	var v TermVocab
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "w%dX Term%d_ÜBER%d term%d ", i%(n/2+1), i, i%7, i)
		}
		return b.String()
	}
	texts := []string{
		"func parseConfigFile(HTTPServer *srv) { parseConfigFile(x); max_term_len := 42 }",
		words(300),
		"Ünïcode ÜBER über Config CONFIG config 2024 a",
		words(4 * keptTermSlots),
		"",
		"func parseConfigFile(HTTPServer *srv) { parseConfigFile(x); max_term_len := 42 }",
	}
	var refs [][]byte
	for _, text := range texts {
		c.Reset()
		c.Count(text)
		refs = append(refs, v.AppendRefs(nil, c.CountedInto(new(CountedBuffer))))
	}
	vocab := strings.Split(v.String(), " ")
	if len(vocab) != v.Len() || len(vocab) != len(slices.Compact(slices.Sorted(slices.Values(vocab)))) {
		t.Fatalf("the vocabulary's %d terms are not %d distinct ones", len(vocab), v.Len())
	}
	for i, text := range texts {
		got := map[string]int{}
		if err := schemas.ParseTermRefs(refs[i], func(id, n uint64) { got[vocab[id]] += int(n) }); err != nil {
			t.Fatal(err)
		}
		if want := TermCounts(text); !reflect.DeepEqual(got, want) && len(want)+len(got) > 0 {
			t.Errorf("%q: counted %v, want %v", text, got, want)
		}
	}
	if !bytes.Equal(refs[0], refs[len(refs)-1]) {
		t.Errorf("the same text's refs: %x, then %x", refs[0], refs[len(refs)-1])
	}
	c.Reset()
	v.Reset()
	c.CountOnce("config/config_loader.go")
	c.Count("config")
	if got := v.AppendRefs(nil, c.CountedInto(new(CountedBuffer))); v.String() != "config config_loader loader go" || !bytes.Equal(got, []byte{0, 2, 1, 1, 2, 1, 3, 1}) {
		t.Errorf("a path counted once, then a word: %q %v", v.String(), got)
	}
}

// storedCursors reads every cursor key as stored: "head" for one that
// follows the head, else its number.
func storedCursors(t *testing.T, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range projectionList {
		v, err := s.get(cursorKey(p.name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(v, followsHead) {
			out[p.name] = "head"
		} else {
			out[p.name] = strconv.FormatUint(getUint64(v), 10)
		}
	}
	return out
}

// Cursors at the head are stored as following it, so a batch that moves
// every cursor with the head writes none; a cursor left behind is written as
// its number once, and follows again once it is back at the head.
func TestWriteCursorsWritesOnlyChangedForms(t *testing.T) {
	_, _, _, s := setup(t)
	all := func(seq uint64) map[string]uint64 {
		c := map[string]uint64{}
		for _, p := range projectionList {
			c[p.name] = seq
		}
		return c
	}
	follows := map[string]bool{}
	step := func(head uint64, cursors, moved map[string]uint64, want map[string]bool) {
		t.Helper()
		b := s.db.NewBatch()
		defer b.Close()
		got, err := writeCursors(b, head, cursors, moved, follows)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || int(b.Count()) != len(want) {
			t.Fatalf("head %d: %d cursors written, changed %v; want %v", head, b.Count(), got, want)
		}
	}
	// A store of numbers (as an earlier binary wrote it) caught up: each
	// cursor follows from now on.
	want := map[string]bool{}
	for _, p := range projectionList {
		want[p.name] = true
	}
	step(5, all(5), all(5), want)
	step(6, all(6), all(6), nil) // every cursor moves with the head
	// Only sessions is folded on (the others are held): they are written
	// as their numbers, once.
	held := all(6)
	held[Sessions] = 7
	want = map[string]bool{}
	for _, p := range projectionList[1:] {
		want[p.name] = false
	}
	step(7, held, map[string]uint64{Sessions: 7}, want)
	held[Sessions] = 8
	step(8, held, map[string]uint64{Sessions: 8}, nil)
	// All at the head again.
	want = map[string]bool{}
	for _, p := range projectionList[1:] {
		want[p.name] = true
	}
	step(9, all(9), all(9), want)
}

// A projection rebuilt alone (its version changed) takes the head back over
// what the others folded: their cursors are stored as numbers meanwhile, so
// a store reopened part-way reads them as they are, and they follow the
// head again once it has caught up. Each event is folded once into each.
func TestCursorsAheadOfTheHeadKeepTheirNumbers(t *testing.T) {
	ctx, log, fs, s := setup(t)
	appendSession(t, ctx, log, "S1")
	seq := appendSession(t, ctx, log, "S2")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	stored := func(s *Store, name string) string {
		t.Helper()
		v, err := s.get(cursorKey(name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(v, followsHead) {
			return "head"
		}
		return strconv.FormatUint(getUint64(v), 10)
	}
	for _, p := range projectionList {
		if got := stored(s, p.name); got != "head" {
			t.Fatalf("cursor of %s stored as %s after a catch-up, want head", p.name, got)
		}
	}
	if err := s.db.Set(versionKey(DAGs), []byte("0"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, ctx, fs, s)
	p := s.Projector(log)
	p.busy.Lock()
	err := p.fold(ctx, false, 2)
	p.busy.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := [2]string{stored(s, DAGs), stored(s, Sessions)}, [2]string{"head", strconv.FormatUint(seq, 10)}; got != want {
		t.Fatalf("stored cursors of dags and sessions part-way: %v, want %v", got, want)
	}
	s = reopen(t, ctx, fs, s)
	if c := s.cursorsCopy(); c[DAGs] != 2 || c[Sessions] != seq {
		t.Fatalf("cursors reopened part-way: %v; want dags 2, sessions %d", c, seq)
	}
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range projectionList {
		if got := stored(s, p.name); got != "head" {
			t.Fatalf("cursor of %s stored as %s once caught up, want head", p.name, got)
		}
	}
	checkFoldedOnce(t, ctx, log, s)
}

// A store an earlier binary wrote (every cursor a number, versions without
// the cursor layout) is read as it is, not rebuilt, and its versions are
// marked, so that such a binary, which would read a cursor following the
// head as 0, rebuilds it rather than fold everything again onto it.
func TestStoreOfNumberedCursorsIsReadAsItIs(t *testing.T) {
	ctx, log, fs, s := setup(t)
	seq := appendSession(t, ctx, log, "S1")
	if _, err := s.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	b := s.db.NewBatch()
	for _, p := range projectionList {
		if err := errors.Join(b.Set(cursorKey(p.name), putUint64(seq), nil),
			b.Set(versionKey(p.name), []byte(strconv.Itoa(p.version)), nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, ctx, fs, s)
	for _, p := range projectionList {
		if c := s.cursorsCopy()[p.name]; c != seq {
			t.Fatalf("cursor of %s = %d, want %d", p.name, c, seq)
		}
		v, err := s.get(versionKey(p.name))
		if err != nil || string(v) != p.storedVersion() {
			t.Fatalf("version of %s stored as %q (%v), want %q", p.name, v, err, p.storedVersion())
		}
		if n, err := strconv.Atoi(string(v)); err == nil && n == p.version {
			t.Fatalf("version of %s reads as %d to an earlier binary", p.name, n)
		}
	}
	if _, err := s.SessionDAG(ctx, "S1", "d"); err != nil {
		t.Fatalf("state dropped: %v", err)
	}
}

// A DAG's checkpointed layers, kept as ranges, answer as the set of layers
// added would, in any order; a store written before the ranges (every layer
// listed under "done") reads as the same set.
func TestCheckpointedLayerRanges(t *testing.T) {
	for _, order := range [][]int{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		{9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
		{0, 2, 4, 6, 8, 1, 3, 5, 7, 9},
		{5, 0, 9, 3, 3, 7, 1, 8, 2, 6, 4},
	} {
		d := &cpDAG{Layers: 10}
		want := map[int]bool{}
		for _, l := range order {
			d.add(l)
			want[l] = true
			for x := -1; x <= 10; x++ {
				if d.has(x) != want[x] {
					t.Fatalf("order %v, after adding %d: has(%d) = %v, want %v (ranges %v)", order, l, x, d.has(x), want[x], d.Done)
				}
			}
			for i := 1; i < len(d.Done); i++ {
				if d.Done[i][0] <= d.Done[i-1][1]+1 {
					t.Fatalf("order %v: ranges %v overlap or touch", order, d.Done)
				}
			}
		}
		if !reflect.DeepEqual(d.Done, [][2]int{{0, 9}}) {
			t.Errorf("order %v: ranges %v, want one range [0 9]", order, d.Done)
		}
	}

	var legacy cpDAG
	if err := json.Unmarshal([]byte(`{"layers":6,"done":[0,1,4,2]}`), &legacy); err != nil {
		t.Fatal(err)
	}
	if want := (cpDAG{Layers: 6, Done: [][2]int{{0, 2}, {4, 4}}}); !reflect.DeepEqual(legacy, want) {
		t.Errorf("legacy record read as %+v, want %+v", legacy, want)
	}
	b, err := json.Marshal(&legacy)
	if err != nil {
		t.Fatal(err)
	}
	var again cpDAG
	if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, legacy) {
		t.Errorf("round trip of %s: %+v, %v", b, again, err)
	}
}

// A code file's record reads back as it was written, whatever its fields
// hold (empty ones, negative numbers, any bytes), and a record cut short or
// with bytes to spare is an error, not a panic or a wrong file.
func TestCodeFileCodecRoundTrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	str := func(s string) string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return s + []string{"", "<&>", "\"q\"\\", "\n\t\x01\x00", "é\xff"}[rng.IntN(5)]
	}
	num := func() int { return []int{0, 1, -1, 1 << 40, math.MinInt64}[rng.IntN(5)] }
	for range 1000 {
		f := &CodeFile{Length: num(), Seq: uint64(rng.Uint64())}
		f.IndexedFile = schemas.IndexedFile{Path: str("p"), Hash: str("h"), Size: int64(num()), Lang: str("go"), Lines: num(),
			Package: str("pkg"), Terms: str("t 1"), Debt: num(), Test: rng.IntN(2) == 0, Stubbed: rng.IntN(2) == 0,
			Redactions: num(), EmbedHash: str("e"), ParseError: str("bad")}
		for range rng.IntN(3) {
			f.Imports = append(f.Imports, str("fmt"))
		}
		for range rng.IntN(3) {
			f.Symbols = append(f.Symbols, schemas.Symbol{Name: str("F"), Kind: str("func"), Recv: str("T"), Line: num(), EndLine: num(), Signature: str("func F()"), Doc: rng.IntN(2) == 0})
		}
		for range rng.IntN(3) {
			f.Calls = append(f.Calls, schemas.Call{From: str("F"), To: str("fmt.Println"), Line: num()})
		}
		for range rng.IntN(3) {
			f.TermRefs = append(f.TermRefs, byte(rng.IntN(256)))
		}
		b := appendCodeFile(nil, f)
		got, err := decodeCodeFile(b)
		if err != nil || !reflect.DeepEqual(got, f) {
			t.Fatalf("round trip of %+v: %+v, %v", f, got, err)
		}
		// A scan reads the hash alone: a record cut short gives it whole
		// or fails.
		if h, err := codeFileHash(b); err != nil || h != f.Hash {
			t.Fatalf("hash of %+v: %q, %v", f, h, err)
		}
		for n := range len(b) {
			if _, err := decodeCodeFile(b[:n]); !errors.Is(err, errCodeFile) {
				t.Fatalf("%d of %d bytes: %v, want errCodeFile", n, len(b), err)
			}
			if h, err := codeFileHash(b[:n]); err == nil && h != f.Hash || err != nil && !errors.Is(err, errCodeFile) {
				t.Fatalf("hash of %d of %d bytes: %q, %v", n, len(b), h, err)
			}
		}
		if _, err := decodeCodeFile(append(b, 0)); !errors.Is(err, errCodeFile) {
			t.Fatalf("a byte to spare: %v, want errCodeFile", err)
		}
	}
}

// A record that is not there reads as it always did (the kind, the quoted
// id, "not found") and is ErrNotFound, though its message is formatted only
// when read.
func TestNotFoundNamesTheRecord(t *testing.T) {
	_, _, _, s := setup(t)
	_, _, err := s.ToolResult(context.Background(), `call "7"`)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing tool result: %v, want ErrNotFound", err)
	}
	if got, want := err.Error(), `tool_result of call "call \"7\"": not found`; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if got, want := fmt.Errorf("look up: %w", err).Error(), "look up: "+fmt.Sprintf("%s %q: %v", "tool_result of call", `call "7"`, ErrNotFound); got != want {
		t.Fatalf("wrapped message %q, want %q", got, want)
	}
}

// A list of names keeps a term's postings, its symbols and its calls in
// sections; each reads back as written, empty sections at the end take no
// bytes, and lengths that overrun the value are an error.
func TestSegmentListSections(t *testing.T) {
	var l segmentLists
	l.reset(codeNameLists.sections)
	l.add("run", codeTermFamily.sec, 0, 3)         // postings only
	l.add("handler7", codeSymbolFamily.sec, 1, 12) // a symbol only
	l.add("parse", codeCallFamily.sec, 2, 5)       // a call only
	l.add("parse", codeTermFamily.sec, 2, 1)       // and a posting
	l.add("handler7", codeTermFamily.sec, 1, 2)    // a posting after the symbol
	l.add("handler7", codeSymbolFamily.sec, 4, 30) // a second symbol
	want := map[string][3][]uint64{
		"run":      {{0, 3}, nil, nil},
		"handler7": {{1, 2}, {1, 12, 4, 30}, nil},
		"parse":    {{2, 1}, nil, {2, 5}},
	}
	if l.names[0] != "run" || len(l.names) != 3 {
		t.Fatalf("names %q", l.names)
	}
	families := []codeFamily{codeTermFamily, codeSymbolFamily, codeCallFamily}
	for k, name := range l.names {
		v := slices.Clone(l.value(k))
		if name == "run" && len(v) != 3 {
			t.Errorf("run's value %v: a postings-only list should be its length and postings", v)
		}
		for s, f := range families {
			sec, err := f.section(v)
			if err != nil {
				t.Fatalf("%s section %d: %v", name, s, err)
			}
			var got []uint64
			for len(sec) > 0 {
				x, n := binary.Uvarint(sec)
				got, sec = append(got, x), sec[n:]
			}
			if !slices.Equal(got, want[name][s]) {
				t.Errorf("%s section %d: %v, want %v", name, s, got, want[name][s])
			}
		}
	}
	if _, err := codeCallFamily.section([]byte{5, 1}); !errors.Is(err, errCorruptSection) {
		t.Errorf("a section overrunning its value: %v", err)
	}
	// Imports have one section: the value is the entries as they are.
	l.reset(codeImportLists.sections)
	l.add("fmt", 0, 7)
	if v := l.value(0); !bytes.Equal(v, []byte{7}) {
		t.Errorf("an import list's value %v", v)
	}
}

// auditTestEvent is an audit_record event of session at seq, stamped at.
func auditTestEvent(t *testing.T, seq uint64, session string, at time.Time) *event {
	t.Helper()
	env, err := schemas.New(schemas.TypeAuditRecord, session, "tester", "", at, schemas.AuditRecord{Category: schemas.AuditFile, Action: "write", Outcome: schemas.OutcomeAllowed})
	if err != nil {
		t.Fatal(err)
	}
	e := newEvent(&events.Event{Seq: seq, Env: env})
	if _, err := e.decode(); err != nil {
		t.Fatal(err)
	}
	return e
}

// An index list (here a session's) is no object of the fold's cache: its
// postings wait in the audit's memo and each flush writes them as chunks
// of their own. A rebuild of 20,000 sessions at once held one cached open
// chunk a session.
func TestAuditIndexListsAreNotCached(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newCache(DefaultCacheBytes)
	tx := &tx{db: db, batch: db.NewBatch(), cache: c}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		if err := applyAudit(tx, auditTestEvent(t, uint64(i+1), fmt.Sprintf("s%d", i%100), at)); err != nil {
			t.Fatal(err)
		}
	}
	for k := range c.m {
		if !strings.HasPrefix(k, "audit/c/") {
			t.Errorf("cached audit object %q: only the categories' chunks are cached", k)
		}
	}
	if _, err := c.flush(tx.batch, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.batch.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte("audit/s/"), UpperBound: []byte("audit/s0")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	chunks := 0
	for it.First(); it.Valid(); it.Next() {
		chunks++
	}
	if chunks != 100 {
		t.Fatalf("%d chunks of the sessions' lists after one flush, want 100 (three postings each)", chunks)
	}
}

// forgetfulAuditFold returns an empty store in memory and a fold's cache
// that forgets every index list it may (auditPostListsKept 1) until the
// test ends.
func forgetfulAuditFold(t *testing.T) (*pebble.DB, *cache) {
	old := auditPostListsKept
	auditPostListsKept = 1
	t.Cleanup(func() { auditPostListsKept = old })
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, newCache(DefaultCacheBytes)
}

// A list the fold forgot (no posting for a while, and more lists than it
// keeps) reads its hw back from its last chunk at its next posting: the
// time of a posting before it bounds the next chunk's, however the clocks
// went.
func TestAuditForgottenListReadsItsHW(t *testing.T) {
	db, c := forgetfulAuditFold(t)
	seq := uint64(0)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fold := func(sessions ...string) {
		t.Helper()
		tx := &tx{db: db, batch: db.NewBatch(), cache: c}
		for _, s := range sessions {
			seq++
			at := base.Add(time.Hour) // the first posting of S1 is the latest of all
			if seq > 1 {
				at = base.Add(time.Duration(seq) * time.Second)
			}
			if err := applyAudit(tx, auditTestEvent(t, seq, s, at)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.flush(tx.batch, nil); err != nil {
			t.Fatal(err)
		}
		c.markClean()
		if err := tx.batch.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		c.evict()
	}
	fold("S1", "S2")       // two lists of sessions, one of an agent: kept, and marked unused
	fold("S3", "S4", "S5") // S1 and S2 had no posting since: forgotten
	if _, ok := c.audit.posts.ids[string(auditListPrefix('s', "S1"))]; ok {
		t.Fatal("S1's list is still known: forget did not drop it")
	}
	fold("S1")
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: auditListPrefix('s', "S1"), UpperBound: prefixEnd(auditListPrefix('s', "S1"))})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if !it.Last() {
		t.Fatal("S1's list is not stored")
	}
	r, err := newAuditChunkReader(it.Value())
	if err != nil {
		t.Fatal(err)
	}
	if want := base.Add(time.Hour).UnixNano(); r.first != seq || r.hw != want {
		t.Fatalf("S1's last chunk at %d has hw %d; want at %d, hw %d (its first posting's time)", r.first, r.hw, seq, want)
	}
}

// A list with postings waiting for the next write is not forgotten, however
// long since its last posting: a rebuild writes the objects every few
// batches and forgets lists at each, and a list forgotten with postings
// waiting had them written under another list. A list forgotten renumbers
// the others: the agent's postings still go to the agent's list.
func TestAuditForgetKeepsWaitingPostings(t *testing.T) {
	db, c := forgetfulAuditFold(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seq := uint64(0)
	tx := &tx{db: db, batch: db.NewBatch(), cache: c}
	write := func() {
		t.Helper()
		if _, err := c.flush(tx.batch, nil); err != nil {
			t.Fatal(err)
		}
		c.markClean()
		if err := tx.batch.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		tx.batch = db.NewBatch()
	}
	// Batches, each evicting (and forgetting); the objects are written
	// after the first (S1's list is forgotten after the second) and the
	// last only.
	for i, batch := range [][]string{{"S1"}, {"S2", "S3", "S4"}, {"S5", "S6", "S7", "S8", "S9"}} {
		for _, s := range batch {
			seq++
			if err := applyAudit(tx, auditTestEvent(t, seq, s, base.Add(time.Duration(seq)*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			write()
		}
		c.evict()
	}
	write()
	list := func(dim byte, value string) []uint64 {
		prefix := auditListPrefix(dim, value)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var seqs []uint64
		for it.First(); it.Valid(); it.Next() {
			r, err := newAuditChunkReader(it.Value())
			if err != nil {
				t.Fatal(err)
			}
			for {
				s, _, ok, err := r.next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				seqs = append(seqs, s)
			}
		}
		return seqs
	}
	for i := 1; i <= 9; i++ {
		if seqs := list('s', fmt.Sprintf("S%d", i)); !slices.Equal(seqs, []uint64{uint64(i)}) {
			t.Errorf("S%d's list holds the entries %v, want [%d]", i, seqs, i)
		}
	}
	if seqs := list('a', "tester"); !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("the agent's list holds the entries %v, want 1 to 9", seqs)
	}
}
