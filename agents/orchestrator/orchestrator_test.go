package orchestrator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/orchestrator"
	"github.com/sylk/sylk/agents/plan"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A DAG of 10,000 nodes runs to completion: 3,000 of them run (100 chains of
// 30 side by side, a step for each node), one fails, and the 6,999
// downstream of it (100 chains of about 70) are skipped, while each step
// reads the DAG's frontier, not its 10,000 nodes. The Orchestrator runs as
// it does in `sylk serve`; the engineers are a runner whose handler reports
// each dispatched node done at once (the gate failed), so the test pays for
// the Orchestrator, the runners and the projections, not for tools.
func TestTenThousandNodeDAGRunsToCompletion(t *testing.T) {
	const chains, ran, skipped = 100, 3000, 6999
	b := brokertest.Start(t, brokertest.Options(t))
	// The run outlasts brokertest.Context's minute on a loaded machine.
	ctx, cancelRun := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancelRun()
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	log := events.New(b.JetStream())
	catalog := plan.Catalog{ToolAgents: []string{"engineer"}, Tools: []string{"list"}}
	orch, err := agents.NewRunner(b.JetStream(), &orchestrator.Orchestrator{Store: store, Log: log, Catalog: catalog},
		agents.Options{Agent: orchestrator.Name, Caught: store, Concurrency: 4, PerSession: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := agents.HandlerFunc(func(_ context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		p, err := schemas.PayloadAs[schemas.TaskDispatch](d.Env)
		if err != nil {
			return nil, agents.Permanent(err)
		}
		if p.NodeID == "gate" {
			out, err := d.Derive(schemas.TypeTaskFailed, orchestrator.Name, "failed", schemas.TaskFailed{DAGID: p.DAGID, NodeID: p.NodeID, Attempt: p.Attempt, Error: "closed"})
			return []*schemas.Envelope{out}, err
		}
		out, err := d.Derive(schemas.TypeTaskComplete, orchestrator.Name, "complete", schemas.TaskComplete{DAGID: p.DAGID, NodeID: p.NodeID, Attempt: p.Attempt})
		return []*schemas.Envelope{out}, err
	})
	eng, err := agents.NewRunner(b.JetStream(), done, agents.Options{Agent: "engineer", Caught: store, Concurrency: chains, PerSession: chains})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{store.Projector(log).Run, orch.Run, eng.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); run(rctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait(); store.Close() })

	dag := schemas.DAG{ID: "big", Name: "big", Policy: schemas.Policy{MaxConcurrency: chains}}
	dag.Nodes = append(dag.Nodes, schemas.Node{ID: "gate", Agent: "engineer", Tool: "list"})
	for _, c := range []struct {
		prefix, first string
		n             int
	}{{"r", "", ran}, {"s", "gate", skipped}} {
		for i := range c.n {
			n := schemas.Node{ID: fmt.Sprintf("%s%d", c.prefix, i), Agent: "engineer", Tool: "list"}
			switch {
			case i >= chains:
				n.DependsOn = []string{fmt.Sprintf("%s%d", c.prefix, i-chains)}
			case c.first != "":
				n.DependsOn = []string{c.first}
			}
			dag.Nodes = append(dag.Nodes, n)
		}
	}
	create, _ := schemas.New(schemas.TypeSessionCreate, "S", "user", "", time.Now(), schemas.SessionCreate{Name: "S"})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	exec, _ := schemas.New(schemas.TypeDAGExecute, "S", "user", orchestrator.Name, time.Now(), schemas.DAGExecute{DAG: dag})
	if _, err := log.AppendBatch(ctx, []*schemas.Envelope{create, resume, exec}); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 5*time.Minute, "the 10,000-node DAG finished", func() bool {
		snap, err := store.OpenDAG(ctx, "S", dag.ID)
		if err != nil {
			return false
		}
		defer snap.Close()
		return snap.Frontier.State != projections.DAGRunning
	})
	d, err := store.SessionDAG(ctx, "S", dag.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := d.Outcome; d.State != projections.DAGFailed || o.Succeeded != ran || o.Failed != 1 || o.Skipped != skipped {
		t.Fatalf("DAG %s %v: %+v", d.State, d.Problems, o)
	}
	layers := max(ran/chains, 1+(skipped+chains-1)/chains)
	cps, err := store.Checkpoints(ctx, "S", dag.ID)
	if err != nil || len(cps) != layers || cps[layers-1].Layer != layers-1 {
		t.Fatalf("%d checkpoints (want %d), %v", len(cps), layers, err)
	}
}
