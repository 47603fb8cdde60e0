package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
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
// sampleNodes are nodes of every shape: plain, every field set (with a
// string that needs escapes), and partial results.
func sampleNodes() []*Node {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
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
		{ID: "c", State: NodeFailed, Attempt: -1, Result: &NodeResult{Seq: 1}},
		{ID: "d", State: NodeSkipped, Result: &NodeResult{Evidence: "only evidence", Seq: 2}},
	}
}

func TestNodeJSONMatchesEncodingJSON(t *testing.T) {
	for _, n := range sampleNodes() {
		want, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendNodeJSON(nil, n); string(got) != string(want) {
			t.Errorf("node %s:\n got %s\nwant %s", n.ID, got, want)
		}
	}
}

// decodeNodeJSON reads what appendNodeJSON writes exactly as encoding/json
// does, and refuses (for encoding/json to decode) what it does not handle.
func TestDecodeNodeJSON(t *testing.T) {
	for _, n := range sampleNodes() {
		b := appendNodeJSON(nil, n)
		var want, got Node
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		ok := decodeNodeJSON(b, &got)
		if escaped := strings.Contains(string(b), "\\"); ok == escaped {
			t.Errorf("node %s: fast decode %v for %s", n.ID, ok, b)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("node %s:\n got %+v\nwant %+v", n.ID, got, want)
		}
	}
	for _, b := range []string{
		`{"id": "a","layer":0,"state":"ready"}`,
		`{"id":"a","layer":0,"state":"ready","extra":1}`,
		`{"id":"a","layer":0,"state":"ready"}x`,
		`{"id":"a","layer":0,"state":"ready"`,
		`{"id":"a","layer":00,"state":"ready"}`,
		`{"id":"a","layer":1,"state":"ready","result":{"seq":18446744073709551616}}`,
		`{"id":"a","layer":9223372036854775808,"state":"ready"}`,
		`{"id":"a","retryable":tru}`,
		`{"id":"a","dispatched_at":"yesterday"}`,
		`{"id":"\u0061"}`,
		`{"id":"a","result":{"summary":"x"},"result":{"seq":1}}`,
	} {
		var n Node
		if decodeNodeJSON([]byte(b), &n) {
			t.Errorf("fast decode took %s", b)
		}
	}
}

// Whatever the fast decoder takes, encoding/json decodes the same way.
func FuzzDecodeNodeJSON(f *testing.F) {
	for _, n := range sampleNodes() {
		f.Add(appendNodeJSON(nil, n))
	}
	f.Add([]byte(`{"id":"a","depends_on":[],"calls":[],"layer":-3,"state":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got Node
		if !decodeNodeJSON(b, &got) {
			return
		}
		var want Node
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("fast decode took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", b, got, want)
		}
	})
}

// An audit entry reads back as it was stored, and a damaged one is an error
// that says so, never a partial entry.
func TestAuditEntryRoundTrip(t *testing.T) {
	e := &AuditEntry{Seq: 42, ID: "e1", Type: schemas.TypeToolCall, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Category: schemas.AuditProcess, Action: "exec", Session: "S1", Agent: "engineer", Target: "go test ./...",
		Outcome: schemas.OutcomeError, Reason: "exit status 1", Details: map[string]string{"call": "c1", "exit_code": "1", "node": "d/a"}}
	v := appendAuditEntry(nil, e)
	got, err := decodeAuditEntry(v)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, e)
	}
	if again := appendAuditEntry(nil, got); !bytes.Equal(again, v) {
		t.Fatal("the same entry encodes to different bytes")
	}
	for _, bad := range [][]byte{nil, {0}, v[:len(v)-1], append(slices.Clone(v), 7), {auditEntryFormat, 1, 2, 0xff}} {
		if got, err := decodeAuditEntry(bad); err == nil || got != nil {
			t.Errorf("%x: %+v, %v; want an error", bad, got, err)
		}
	}
}

// A TermCounter counts what TermCounts counts, text after text, and
// CountOnce counts each distinct term of its text once.
func TestTermCounter(t *testing.T) {
	var c TermCounter
	for _, text := range []string{
		"func parseConfigFile(HTTPServer *srv) { parseConfigFile(x); max_term_len := 42 }",
		"Ünïcode ÜBER über Config CONFIG config 2024 a",
		"",
	} {
		c.Reset()
		c.Count(text)
		got := map[string]int{}
		if err := schemas.ParseTerms(c.Format(), func(term string, n int) { got[term] += n }); err != nil {
			t.Fatal(err)
		}
		if want := TermCounts(text); !reflect.DeepEqual(got, want) && len(want)+len(got) > 0 {
			t.Errorf("%q: counted %v, want %v", text, got, want)
		}
	}
	c.Reset()
	c.CountOnce("config/config_loader.go")
	c.Count("config")
	if got := c.Format(); got != "config 2 config_loader 1 loader 1 go 1" {
		t.Errorf("a path counted once, then a word: %q", got)
	}
}
