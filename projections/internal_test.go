package projections

import (
	"context"
	"encoding/json"
	"errors"
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
	s.Close()
	s, err := Open(ctx, Options{Dir: "/p", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
	// The sessions projection was not folded again: a second session_create
	// would have been refused.
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

func TestCacheEvictsCleanObjectsOnly(t *testing.T) {
	c := newCache(2)
	for _, k := range []string{"a", "b", "c"} {
		c.put([]byte(k), &k, true)
	}
	c.markClean()
	c.evict()
	if len(c.m) != 2 {
		t.Fatalf("%d objects cached, want 2", len(c.m))
	}
	if _, ok := c.get([]byte("a")); ok {
		t.Fatal("the least recently used object was kept")
	}
	x := "x"
	c.put([]byte("d"), &x, true)
	c.put([]byte("e"), &x, true)
	c.put([]byte("f"), &x, true)
	if len(c.dirty) != 3 || len(c.m) != 5 {
		t.Fatalf("dirty %d, cached %d: dirty objects must stay until committed", len(c.dirty), len(c.m))
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

// The hand-written node encoder writes what encoding/json writes.
func TestNodeJSONMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	nodes := []*Node{
		{ID: "a", State: NodeReady},
		{ID: "b", Agent: "engineer", Tool: "exec", Prompt: "say \"hi\" <&> \\ \n\t\x01 é \u2028 \xff end", DependsOn: []string{"a", "c"}, Layer: 2, State: NodeSucceeded,
			Attempt: 3, Result: &NodeResult{Summary: "ok", Evidence: "PASS", CallID: "c1", Seq: 9}, LastError: "boom", Retryable: true,
			Help: "stuck", SkipReason: "why", Calls: []Call{{ID: "c1", Tool: "exec", Attempt: 1, Seq: 4, ResultSeq: 5, OK: true}, {ID: "c2"}},
			DispatchedAt: &at, StartedAt: &at, FinishedAt: &at},
		{ID: "c", State: NodeFailed, Result: &NodeResult{Seq: 1}},
		{ID: "d", State: NodeSkipped, Result: &NodeResult{Evidence: "only evidence", Seq: 2}},
	}
	for _, n := range nodes {
		want, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendNodeJSON(nil, n); string(got) != string(want) {
			t.Errorf("node %s:\n got %s\nwant %s", n.ID, got, want)
		}
	}
}
