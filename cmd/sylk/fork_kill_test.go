package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

// TestForkSurvivesSIGKILL forks a finished session in the middle of its DAG
// twice, each time killing `sylk serve` with SIGKILL as the fork event
// lands (while the projector seeds the fork's state from the parent's
// history, or just after, while the Orchestrator dispatches the fork's
// nodes), and restarts it. Each fork is then whole: its session, lineage and
// DAG are there, the DAG runs to the end in the fork, the parent is as it
// was, and the projections equal a clean rebuild.
func TestForkSurvivesSIGKILL(t *testing.T) {
	t.Parallel()         // a long end-to-end run of its own processes, ports and directories
	const notices = 2000 // parent history before the DAG, folded to seed each fork
	bin := sylkBinary(t)
	dir := t.TempDir()
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "plan.yaml"), []byte(`name: chain
nodes:
  - {id: n1, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo n1 >> lines.txt"]}}
  - {id: n2, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo n2 >> lines.txt"]}, depends_on: [n1]}
  - {id: n3, agent: engineer, tool: exec, args: {argv: [sh, -c, "echo n3 >> lines.txt"]}, depends_on: [n2]}
`), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sylk := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--data", data}, args...)...)
		cmd.Dir = work
		return cmd.Output()
	}
	connect := func() (*nats.Conn, *events.Log, *api.Client) {
		info, err := broker.ReadInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		c := api.NewClient(nc)
		brokertest.Eventually(t, 30*time.Second, "the api answering", func() bool { return c.Ping(ctx) == nil })
		return nc, events.New(js), c
	}

	srv := startServe(t, bin, data, work)
	out, err := sylk("session", "new", "parent", "--json")
	if err != nil {
		t.Fatalf("session new: %v\n%s", err, out)
	}
	var parent projections.Session
	if err := json.Unmarshal(out, &parent); err != nil {
		t.Fatal(err)
	}
	nc, log, client := connect()
	var batch []*schemas.Envelope
	for i := range notices {
		env, _ := schemas.New(schemas.TypeNotice, parent.ID, "user", "user", time.Now(), schemas.Notice{Level: schemas.NoticeInfo, Text: fmt.Sprintf("note %d", i)})
		batch = append(batch, env)
		if len(batch) == events.MaxBatch || i == notices-1 {
			if _, err := log.AppendBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if out, err = sylk("run", "plan.yaml", "--session", parent.ID, "--json"); err != nil {
		t.Fatalf("sylk run: %v\n%s", err, out)
	}
	var run conversation.Outcome
	if err := json.Unmarshal(out, &run); err != nil || run.Outcome != schemas.OutcomeSucceeded {
		t.Fatalf("run %s: %+v %v", out, run, err)
	}
	dispatches, err := log.Read(ctx, events.Filter{Session: parent.ID, Type: schemas.TypeTaskDispatch}.Subject(), events.Cursor{}, 0)
	if err != nil || len(dispatches) != 3 {
		t.Fatalf("%d dispatches in the parent, %v", len(dispatches), err)
	}
	at := dispatches[1].Seq // n2 dispatched, not finished: it runs again in each fork
	before, err := client.SessionDAG(ctx, parent.ID, run.DAG)
	if err != nil {
		t.Fatal(err)
	}

	forks := []string{"fork-0", "fork-1"}
	for k, id := range forks {
		// The fork has landed once its event is stored: a tail of the stream
		// sees it only then. A core NATS subscriber sees the publish before
		// the stream stores it, and a kill at that moment loses the event:
		// the fork command fails, as it should, and there is no fork to
		// finish (the kill landed there in 5 of 12 tries).
		tail, err := log.Tail(ctx, events.Filter{Session: id, Type: schemas.TypeSessionFork}.Subject(), events.Cursor{})
		if err != nil {
			t.Fatal(err)
		}
		fork := exec.CommandContext(ctx, bin, "--data", data, "session", "fork", parent.ID, "--at", fmt.Sprint(at), "--id", id, "--json")
		fork.Dir = work
		if err := fork.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := tail.Next(ctx); err != nil {
			t.Fatalf("fork %s: the session_fork event never came: %v", id, err)
		}
		<-time.After(time.Duration(k*30) * time.Millisecond) // 0 and 30 ms into the fork's work
		srv.kill(t)
		t.Logf("killed %d ms after %s landed; the fork command: %v", k*30, id, fork.Wait()) // it may have printed the fork, or lost its server
		tail.Stop()
		nc.Close()
		srv = startServe(t, bin, data, work)
		nc, log, client = connect()
	}
	defer nc.Close()

	for _, id := range forks {
		var dag *projections.DAG
		brokertest.Eventually(t, 2*time.Minute, "the DAG of "+id+" finished", func() bool {
			d, err := client.SessionDAG(ctx, id, run.DAG)
			dag = d
			return err == nil && d.State != projections.DAGRunning
		})
		if dag.State != projections.DAGSucceeded || dag.Outcome.Succeeded != 3 {
			t.Fatalf("the DAG of %s %s: %+v", id, dag.State, dag.Outcome)
		}
		if n := dag.Node("n2"); n.Result == nil || n.Result.Seq <= at {
			t.Fatalf("%s: node n2 %+v, want a result of the fork's own", id, n.Result)
		}
		s, err := client.Session(ctx, id)
		if err != nil || s.Fork == nil || s.Fork.Parent != parent.ID || s.Fork.ParentSeq != at {
			t.Fatalf("session %s: %+v, %v; want a fork of %s at %d", id, s, err, parent.ID, at)
		}
		page, err := client.SessionLog(ctx, projections.LogQuery{Session: id, Limit: 100_000})
		if err != nil {
			t.Fatal(err)
		}
		shared := 0
		for _, e := range page.Entries {
			if e.From == parent.ID {
				shared++
				if e.Seq > at {
					t.Fatalf("%s: the parent's seq %d in its log, past the fork point %d", id, e.Seq, at)
				}
			}
		}
		if shared < notices {
			t.Fatalf("%s: %d events of the parent in its log, want its history up to seq %d", id, shared, at)
		}
	}
	after, err := client.SessionDAG(ctx, parent.ID, run.DAG)
	if err != nil || after.Outcome.Seq != before.Outcome.Seq || after.Node("n3").Result.Seq != before.Node("n3").Result.Seq {
		t.Fatalf("the parent's DAG changed: %+v, %v", after.Outcome, err)
	}
	if lines := readLines(t, filepath.Join(work, "lines.txt")); strings.Count(strings.Join(lines, " "), "n3") < 1+len(forks) {
		t.Fatalf("lines.txt %v: want n3 run by the parent and by each fork", lines)
	}
	nc.Close()
	srv.stop(t)
	verifyProjections(t, data)
}
