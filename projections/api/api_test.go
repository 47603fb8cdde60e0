package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	ctx    context.Context
	log    *events.Log
	store  *projections.Store
	client *api.Client
	nc     func() *api.Client
}

// serve runs a broker, a store with its projector and the service, as `sylk
// serve` does, and a client on its own connection.
func serve(t *testing.T) *fixture {
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	log := events.New(b.JetStream())
	quiet := slog.New(slog.DiscardHandler)
	store, err := projections.Open(ctx, projections.Options{Dir: "/p", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- store.Projector(log).Run(rctx) }()
	svc, err := api.Serve(ctx, b.Conn(), store, log, quiet)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := b.NewConn("client")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		if err := svc.Stop(); err != nil {
			t.Error(err)
		}
		cancel()
		<-done
		store.Close()
	})
	return &fixture{ctx: ctx, log: log, store: store, client: api.NewClient(nc)}
}

func (f *fixture) append(t *testing.T, session string, typ schemas.Type, p any) uint64 {
	t.Helper()
	env, err := schemas.New(typ, session, "user", "", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), p)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := f.log.Append(f.ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The client answers exactly what the store answers.
func TestClientAnswersLikeTheStore(t *testing.T) {
	f := serve(t)
	for i := range 3 {
		s := fmt.Sprintf("S%d", i)
		f.append(t, s, schemas.TypeSessionCreate, schemas.SessionCreate{Name: "n" + s})
		f.append(t, s, schemas.TypeSessionResume, schemas.SessionResume{})
		f.append(t, s, schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: "d" + s, Nodes: []schemas.Node{{ID: "a"}, {ID: "b", DependsOn: []string{"a"}}}}})
		f.append(t, s, schemas.TypeClarificationRequest, schemas.ClarificationRequest{Question: "?", Asker: "tester"})
		f.append(t, s, schemas.TypeHistoryEntry, schemas.HistoryEntry{Category: "failure", Summary: "node a failed in " + s, Tags: []string{"task"}, Approach: "engineer exec (node a)", ErrorPattern: "exit status <n>"})
		f.append(t, s, schemas.TypeHistoryEntry, schemas.HistoryEntry{Category: "decision", Summary: "plan approved", Detail: "by " + s})
	}
	f.append(t, "_", schemas.TypeIndexUpdate, schemas.IndexUpdate{Root: "/w", Files: []schemas.IndexedFile{
		{Path: "a.go", Hash: "h1", Lang: "go", Package: "m/a", Symbols: []schemas.Symbol{{Name: "Load", Kind: "func", Line: 3}}, Terms: "load 2 config 1"},
	}})
	f.append(t, "S1", schemas.TypeSkillsSelected, schemas.SkillsSelected{CallID: "sel-1", Agent: "engineer", NodeID: "a", Strategy: "match",
		Skills: []schemas.SelectedSkill{{Name: "go-testing", Tier: 2, Source: "builtin", Reason: "tier 2: load trigger matched \"test\"", Body: "Run go test."}}})
	f.append(t, "S1", schemas.TypeToolsLoaded, schemas.ToolsLoaded{CallID: "sel-1", Agent: "engineer", NodeID: "a", Via: "start", Loaded: []string{"exec", "read_file"}})
	f.append(t, "S1", schemas.TypeToolsLoaded, schemas.ToolsLoaded{CallID: "c1", Agent: "tester", NodeID: "b", Via: "request_tools", Tools: []string{"glob", "rm"},
		Loaded: []string{"glob"}, Rejected: []schemas.SkillNote{{Name: "rm", Reason: "unknown tool"}}})
	f.append(t, "_", schemas.TypeEmbedding, schemas.Embedding{Key: schemas.EmbeddingKey("m", 0, "t1"), Model: "m", TextHash: "t1", Vector: []float32{0.6, 0.8}})
	f.append(t, "S1", schemas.TypePermissionRequest, schemas.PermissionRequest{Agent: "engineer", Tool: "exec", Action: schemas.ActionCommand, Target: "make lint", Grant: "make", CallID: "c1"})
	asked := f.append(t, "S2", schemas.TypePermissionRequest, schemas.PermissionRequest{Agent: "engineer", Tool: "exec", Action: schemas.ActionCommand, Target: "curl x", Grant: "curl", CallID: "c2"})
	req, err := f.log.Get(f.ctx, asked)
	if err != nil {
		t.Fatal(err)
	}
	f.append(t, "S2", schemas.TypePermissionDecision, schemas.PermissionDecision{RequestID: req.Env.ID, Decision: schemas.DecisionAllow, Scope: schemas.PermitAlways})
	for _, a := range []string{schemas.SignalPause, schemas.SignalResume} {
		f.append(t, "_", schemas.TypeSignal, schemas.Signal{Action: a, Scope: schemas.ScopeAll})
	}
	f.append(t, "_", schemas.TypeScheduleAdd, schemas.ScheduleAdd{Name: "nightly", Spec: schemas.ScheduleSpec{Cron: "0 3 * * *"}, Request: "check"})
	f.append(t, "_", schemas.TypeScheduleFire, schemas.ScheduleFire{Name: "nightly", Due: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), Session: "S9"})
	last := f.append(t, "S1", schemas.TypeCheckpoint, schemas.Checkpoint{DAGID: "dS1", Layer: 0})
	f.client.MinSeq = last // read-your-writes: the server waits for the projector
	ctx := f.ctx
	if _, err := f.client.Session(ctx, "S1"); err != nil {
		t.Fatalf("with min_seq %d: %v", last, err)
	}
	open, err := f.store.Permits(ctx, projections.PermitFilter{Session: "S1"})
	if err != nil || len(open) != 1 {
		t.Fatalf("permits of S1: %v, %v", open, err)
	}
	checks := []struct {
		name          string
		store, client func() (any, error)
	}{
		{"session", func() (any, error) { return f.store.Session(ctx, "S1") }, func() (any, error) { return f.client.Session(ctx, "S1") }},
		{"sessions", func() (any, error) { return f.store.Sessions(ctx, projections.SessionFilter{}) }, func() (any, error) { return f.client.Sessions(ctx, projections.SessionFilter{}) }},
		{"dag", func() (any, error) { return f.store.DAG(ctx, "dS2") }, func() (any, error) { return f.client.DAG(ctx, "dS2") }},
		{"dags", func() (any, error) { return f.store.DAGs(ctx, projections.DAGFilter{Session: "S0"}) }, func() (any, error) { return f.client.DAGs(ctx, projections.DAGFilter{Session: "S0"}) }},
		{"checkpoints", func() (any, error) { return f.store.Checkpoints(ctx, "S1", "") }, func() (any, error) { return f.client.Checkpoints(ctx, "S1", "") }},
		{"pending", func() (any, error) { return f.store.Pending(ctx, "") }, func() (any, error) { return f.client.Pending(ctx, "") }},
		{"permits", func() (any, error) {
			return f.store.Permits(ctx, projections.PermitFilter{State: projections.PermitOpen})
		}, func() (any, error) {
			return f.client.Permits(ctx, projections.PermitFilter{State: projections.PermitOpen})
		}},
		{"permit", func() (any, error) { return f.store.Permit(ctx, open[0].ID) }, func() (any, error) { return f.client.Permit(ctx, open[0].ID) }},
		{"permit grants", func() (any, error) { return f.store.PermitGrants(ctx) }, func() (any, error) { return f.client.PermitGrants(ctx) }},
		{"log", func() (any, error) {
			return f.store.SessionLog(ctx, projections.LogQuery{Session: "S1", Limit: 2})
		}, func() (any, error) { return f.client.SessionLog(ctx, projections.LogQuery{Session: "S1", Limit: 2}) }},
		{"global log", func() (any, error) {
			return f.store.SessionLog(ctx, projections.LogQuery{Global: true, From: 2, Limit: 1})
		}, func() (any, error) {
			return f.client.SessionLog(ctx, projections.LogQuery{Global: true, From: 2, Limit: 1})
		}},
		{"as of", func() (any, error) { return f.store.SessionAsOf(ctx, "S1", projections.AsOf{Seq: 7}) }, func() (any, error) {
			return f.client.SessionAsOf(ctx, "S1", projections.AsOf{Seq: 7})
		}},
		{"history", func() (any, error) {
			return f.store.History(ctx, projections.HistoryQuery{Session: "S1", CrossSession: true, Search: "S2", Limit: 5})
		}, func() (any, error) {
			return f.client.History(ctx, projections.HistoryQuery{Session: "S1", CrossSession: true, Search: "S2", Limit: 5})
		}},
		{"history of a session", func() (any, error) {
			return f.store.History(ctx, projections.HistoryQuery{Sessions: []string{"S0", "S2"}, Categories: []string{"failure"}, Until: time.Now()})
		}, func() (any, error) {
			return f.client.History(ctx, projections.HistoryQuery{Sessions: []string{"S0", "S2"}, Categories: []string{"failure"}, Until: time.Now()})
		}},
		{"failures", func() (any, error) {
			return f.store.Failures(ctx, projections.FailureQuery{MinCount: 2})
		}, func() (any, error) { return f.client.Failures(ctx, projections.FailureQuery{MinCount: 2}) }},
		{"history by id", func() (any, error) {
			hs, err := f.store.History(ctx, projections.HistoryQuery{CrossSession: true, Limit: 1})
			if err != nil || len(hs) == 0 {
				return nil, err
			}
			return f.store.History(ctx, projections.HistoryQuery{ID: hs[0].ID})
		}, func() (any, error) {
			hs, err := f.client.History(ctx, projections.HistoryQuery{CrossSession: true, Limit: 1})
			if err != nil || len(hs) == 0 {
				return nil, err
			}
			return f.client.History(ctx, projections.HistoryQuery{ID: hs[0].ID})
		}},
		{"code search", func() (any, error) {
			return f.store.Code(ctx, projections.CodeQuery{Root: "/w", Kind: projections.CodeSearch, Text: "config"})
		}, func() (any, error) {
			return f.client.Code(ctx, projections.CodeQuery{Root: "/w", Kind: projections.CodeSearch, Text: "config"})
		}},
		{"embeddings", func() (any, error) {
			return f.store.Embeddings(ctx, []string{schemas.EmbeddingKey("m", 0, "t1"), "nothere"})
		}, func() (any, error) {
			return f.client.Embeddings(ctx, []string{schemas.EmbeddingKey("m", 0, "t1"), "nothere"})
		}},
		{"code symbol", func() (any, error) {
			return f.store.Code(ctx, projections.CodeQuery{Root: "/w", Kind: projections.CodeSymbol, Text: "Load"})
		}, func() (any, error) {
			return f.client.Code(ctx, projections.CodeQuery{Root: "/w", Kind: projections.CodeSymbol, Text: "Load"})
		}},
		{"loadout", func() (any, error) { return f.store.Loadout(ctx, "S1", "engineer") }, func() (any, error) { return f.client.Loadout(ctx, "S1", "engineer") }},
		{"loadouts", func() (any, error) { return f.store.Loadouts(ctx, "S1") }, func() (any, error) { return f.client.Loadouts(ctx, "S1") }},
		{"schedule", func() (any, error) { return f.store.Schedule(ctx, "nightly") }, func() (any, error) { return f.client.Schedule(ctx, "nightly") }},
		{"schedules", func() (any, error) { return f.store.Schedules(ctx) }, func() (any, error) { return f.client.Schedules(ctx) }},
		{"audit", func() (any, error) {
			return f.store.Audit(ctx, projections.AuditQuery{Category: schemas.AuditPermission, Session: "S2"})
		}, func() (any, error) {
			return f.client.Audit(ctx, projections.AuditQuery{Category: schemas.AuditPermission, Session: "S2"})
		}},
		{"trace", func() (any, error) {
			page, err := f.store.SessionLog(ctx, projections.LogQuery{Session: "S0"})
			if err != nil {
				return nil, err
			}
			env, _ := schemas.Unmarshal(page.Entries[0].Data)
			return f.store.Trace(ctx, env.CorrelationID)
		}, func() (any, error) {
			page, err := f.client.SessionLog(ctx, projections.LogQuery{Session: "S0"})
			if err != nil {
				return nil, err
			}
			env, _ := schemas.Unmarshal(page.Entries[0].Data)
			return f.client.Trace(ctx, env.CorrelationID)
		}},
	}
	for _, c := range checks {
		want, err := c.store()
		if err != nil {
			t.Fatalf("%s: store: %v", c.name, err)
		}
		got, err := c.client()
		if err != nil {
			t.Fatalf("%s: client: %v", c.name, err)
		}
		if j := jsonOf(t, want); j == "[]" || j == "null" {
			t.Fatalf("%s: the store has nothing to compare", c.name)
		}
		if jsonOf(t, got) != jsonOf(t, want) {
			t.Errorf("%s: client %s\nstore %s", c.name, jsonOf(t, got), jsonOf(t, want))
		}
	}
}

func TestErrorsNameTheIDAndMatchTheSentinels(t *testing.T) {
	f := serve(t)
	f.append(t, "A", schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: "same", Nodes: []schemas.Node{{ID: "x"}}}})
	f.client.MinSeq = f.append(t, "B", schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: "same", Nodes: []schemas.Node{{ID: "x"}}}})

	_, err := f.client.Session(f.ctx, "nope")
	var ae *api.Error
	if !errors.Is(err, projections.ErrNotFound) || !errors.As(err, &ae) || ae.Code != api.CodeNotFound || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := f.client.DAG(f.ctx, "same"); !errors.Is(err, projections.ErrAmbiguous) || !strings.Contains(err.Error(), "A, B") {
		t.Fatalf("ambiguous dag: %v", err)
	}
	if d, err := f.client.SessionDAG(f.ctx, "B", "same"); err != nil || d.Session != "B" {
		t.Fatalf("dag of session B: %v, %v", d, err)
	}
	if _, _, err := f.client.ToolResult(f.ctx, "c9"); !errors.Is(err, projections.ErrNotFound) {
		t.Fatalf("unrecorded call: %v", err)
	}
	if _, err := f.client.Session(f.ctx, ""); !errors.As(err, &ae) || ae.Code != api.CodeBadRequest {
		t.Fatalf("no id: %v", err)
	}
	if _, err := f.client.Audit(f.ctx, projections.AuditQuery{Outcome: "refused"}); !errors.Is(err, projections.ErrInvalidQuery) || !strings.Contains(err.Error(), `"refused"`) {
		t.Fatalf("unknown audit outcome: %v", err)
	}
	if _, err := f.client.Loadout(f.ctx, "A", "engineer"); !errors.Is(err, projections.ErrNotFound) || !strings.Contains(err.Error(), `"engineer"`) {
		t.Fatalf("no loadout: %v", err)
	}
	if _, err := f.client.Loadout(f.ctx, "A", ""); !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(err.Error(), "agent is required") {
		t.Fatalf("loadout without an agent: %v", err)
	}
	if l, err := f.client.Loadouts(f.ctx, "A"); err != nil || l == nil || len(l) != 0 {
		t.Fatalf("loadouts of a session without any: %v %v", l, err)
	}
	_, err = f.client.History(f.ctx, projections.HistoryQuery{Session: "A", CurrentOnly: true, CrossSession: true})
	if !errors.Is(err, projections.ErrInvalidQuery) || !errors.As(err, &ae) || ae.Code != api.CodeBadRequest || !strings.Contains(err.Error(), "current_only and cross_session") {
		t.Fatalf("contradictory history query: %v", err)
	}
}

// Any NATS client can ask: the body is JSON, errors are micro errors.
func TestPlainNATSRequest(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	log := events.New(b.JetStream())
	store, err := projections.Open(ctx, projections.Options{Dir: "/p", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	env, _ := schemas.New(schemas.TypeSessionCreate, "S", "user", "", time.Now(), schemas.SessionCreate{Name: "plain"})
	if _, err := log.Append(ctx, env); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	svc, err := api.Serve(ctx, b.Conn(), store, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	nc, err := b.NewConn("outsider")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msg, err := nc.Request(api.SubjectSessionGet, []byte(`{"id":"S"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(msg.Data, &s); err != nil || s["name"] != "plain" || s["state"] != "created" {
		t.Fatalf("answer %s: %v", msg.Data, err)
	}
	hist, _ := schemas.New(schemas.TypeHistoryEntry, "S", "archivalist", "user", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), schemas.HistoryEntry{Category: "outcome", Summary: "Workflow d1 succeeded"})
	seq, err := log.Append(ctx, hist)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]int{
		`{"search_text":"workflow","categories":["outcome"],"since_time":"2026-01-02T03:04:05Z","min_seq":` + fmt.Sprint(seq) + `}`: 1,
		`{"session_ids":["S"],"until_time":"2026-01-02T03:04:04Z"}`:                                                                 0,
	} {
		msg, err := nc.Request(api.SubjectHistoryList, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var hs []map[string]any
		if err := json.Unmarshal(msg.Data, &hs); err != nil || len(hs) != want || want > 0 && hs[0]["summary"] != "Workflow d1 succeeded" {
			t.Fatalf("history %s: answer %s: %v", body, msg.Data, err)
		}
	}
	msg, err = nc.Request(api.SubjectSessionGet, []byte(`{"id":"T"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get(micro.ErrorCodeHeader) != "404" || !strings.Contains(msg.Header.Get(micro.ErrorHeader), `"T"`) {
		t.Fatalf("error headers %v", msg.Header)
	}
}

func TestVerifyWaitAndRebuildThroughTheServer(t *testing.T) {
	f := serve(t)
	for i := range 10 {
		f.append(t, fmt.Sprintf("S%d", i), schemas.TypeSessionCreate, schemas.SessionCreate{})
	}
	seq := f.append(t, "S0", schemas.TypeSessionResume, schemas.SessionResume{})
	if err := f.client.WaitFor(f.ctx, seq); err != nil {
		t.Fatal(err)
	}
	rep, err := f.client.Verify(f.ctx)
	if err != nil || rep.Applied != seq || rep.Keys == 0 {
		t.Fatalf("verify = %+v, %v", rep, err)
	}
	if _, err := f.client.Rebuild(f.ctx); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "rebuilt", func() bool {
		st, err := f.client.Status(f.ctx)
		return err == nil && st.Rebuild == nil && st.Applied == seq
	})
	if s, err := f.client.Session(f.ctx, "S0"); err != nil || s.State != projections.StateActive {
		t.Fatalf("after the rebuild: %+v, %v", s, err)
	}
	if _, err := f.client.Verify(f.ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNoServer(t *testing.T) {
	b := brokertest.Start(t, brokertest.Options(t))
	c := api.NewClient(b.Conn())
	if err := c.Ping(brokertest.Context(t)); !errors.Is(err, api.ErrNoServer) {
		t.Fatalf("Ping with no service = %v, want ErrNoServer", err)
	}
}
