package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

// The binaries the tests build, once per run, into binDir (which TestMain
// removes): path by package, or the error building it gave.
var (
	binMu   sync.Mutex
	binDir  string
	binPath = map[string]string{}
	binErr  = map[string]error{}
)

// sylkBinary builds the sylk binary once, without the race detector, for the
// tests that run it as a real process and need it at full speed.
func sylkBinary(t *testing.T) string { return buildBinary(t, "sylk", ".") }

// natsServerBinary builds a plain nats-server from the module Sylk embeds
// (nothing is downloaded), for the tests against an external NATS.
func natsServerBinary(t *testing.T) string {
	return buildBinary(t, "nats-server", "github.com/nats-io/nats-server/v2")
}

func buildBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := binPath[pkg]; ok {
		return p
	}
	if err, ok := binErr[pkg]; ok {
		t.Fatal(err)
	}
	err := func() error {
		if binDir == "" {
			d, err := os.MkdirTemp("", "sylk-bin-")
			if err != nil {
				return err
			}
			binDir = d
		}
		p := filepath.Join(binDir, name)
		if out, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
		binPath[pkg] = p
		return nil
	}()
	if err != nil {
		binErr[pkg] = err
		t.Fatal(err)
	}
	return binPath[pkg]
}

// killTemplate is one session of events addressed to the user, which no agent
// consumes: only the projector works on them. It is created and resumed, runs
// a 2-node DAG with a checkpoint, and completes: 10 events.
var killTemplate = func() []*schemas.Envelope {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dag := "d"
	ev := func(t schemas.Type, p any) *schemas.Envelope {
		env, err := schemas.New(t, "template", "user", "user", ts, p)
		if err != nil {
			panic(err)
		}
		return env
	}
	return []*schemas.Envelope{
		ev(schemas.TypeSessionCreate, schemas.SessionCreate{Name: "killed"}),
		ev(schemas.TypeSessionResume, schemas.SessionResume{}),
		ev(schemas.TypeDAGExecute, schemas.DAGExecute{DAG: schemas.DAG{ID: dag, Nodes: []schemas.Node{{ID: "a", Tool: "exec"}, {ID: "b", Tool: "exec", DependsOn: []string{"a"}}}}}),
		ev(schemas.TypeTaskDispatch, schemas.TaskDispatch{DAGID: dag, NodeID: "a", Attempt: 1}),
		ev(schemas.TypeTaskComplete, schemas.TaskComplete{DAGID: dag, NodeID: "a", Attempt: 1, Summary: "ok"}),
		ev(schemas.TypeCheckpoint, schemas.Checkpoint{DAGID: dag, Layer: 0, Succeeded: []string{"a"}}),
		ev(schemas.TypeTaskDispatch, schemas.TaskDispatch{DAGID: dag, NodeID: "b", Attempt: 1}),
		ev(schemas.TypeTaskComplete, schemas.TaskComplete{DAGID: dag, NodeID: "b", Attempt: 1, Summary: "ok"}),
		ev(schemas.TypeWorkflowComplete, schemas.WorkflowComplete{DAGID: dag, Outcome: schemas.OutcomeSucceeded}),
		ev(schemas.TypeSessionComplete, schemas.SessionComplete{Summary: "done"}),
	}
}()

// killStream is the template for one session: the same payloads (so they
// are encoded once), fresh ids.
func killStream(session string, i int) []*schemas.Envelope {
	out := make([]*schemas.Envelope, len(killTemplate))
	for j, tmpl := range killTemplate {
		env := *tmpl
		env.ID = schemas.NewID()
		env.CorrelationID, env.SessionID = env.ID, session
		env.Timestamp = env.Timestamp.Add(time.Duration(i) * time.Second)
		out[j] = &env
	}
	return out
}

// writeKillStream appends sessions of killStream (named prefix + number) to
// the stream of a data directory, with no server left running.
func writeKillStream(ctx context.Context, t *testing.T, data, prefix string, sessions int) {
	t.Helper()
	b, err := broker.Start(ctx, broker.Options{DataDir: data, Listen: broker.ListenNone, Sync: broker.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	log := events.New(b.JetStream())
	var batch []*schemas.Envelope
	for i := range sessions {
		batch = append(batch, killStream(fmt.Sprintf("%s%05d", prefix, i), i)...)
		if len(batch) == events.MaxBatch || i == sessions-1 {
			if _, err := log.AppendBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestKilledWhileProjectingThenVerify kills `sylk serve` with SIGKILL while it
// projects a stream of 100k events (and more keep coming), starts it again,
// and checks that it catches up to exactly the state of a clean rebuild, with
// every event applied once.
func TestKilledWhileProjectingThenVerify(t *testing.T) {
	t.Parallel()            // a long end-to-end run of its own processes, ports and directories
	const sessions = 10_000 // 100k events
	bin := sylkBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	// Writing the stream alone can take minutes on a loaded 2-core machine
	// (3 minutes for the whole test ran out there after verify had passed);
	// the package's -timeout is the outer bound.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	writeKillStream(ctx, t, data, "k", sessions)

	serve := func() (*exec.Cmd, chan error) {
		os.Remove(filepath.Join(data, broker.InfoFile)) // a killed server leaves it behind
		cmd := exec.Command(bin, "--data", data, "serve", "--listen", "127.0.0.1:0", "--sync", "interval")
		logf, err := os.OpenFile(data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, done
	}
	connect := func() (*nats.Conn, *api.Client) {
		var info broker.Info
		brokertest.Eventually(t, 30*time.Second, "server.json", func() bool {
			i, err := broker.ReadInfo(data)
			info = i
			return err == nil
		})
		nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
		if err != nil {
			t.Fatal(err)
		}
		c := api.NewClient(nc)
		brokertest.Eventually(t, 30*time.Second, "the api answering", func() bool { return c.Ping(ctx) == nil })
		return nc, c
	}

	cmd, done := serve()
	nc, client := connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// More events keep arriving while it projects.
	var appended atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		live := events.New(js)
		for i := sessions; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			envs := killStream(fmt.Sprintf("k%05d", i), i)
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := live.AppendBatch(actx, envs)
			acancel()
			if err != nil {
				return // the server is gone
			}
			appended.Add(int64(len(envs)))
		}
	}()
	// The session log's cursor moves with every batch; the state projections'
	// cursors move when a catch-up writes its held objects (every 250k events
	// or at its end), so the kill lands between their writes.
	var at uint64
	brokertest.Eventually(t, 60*time.Second, "the projector well into the stream", func() bool {
		st, err := client.Status(ctx)
		if err != nil {
			return false
		}
		for _, p := range st.Projections {
			if p.Name == projections.Log && p.Cursor >= 30_000 {
				at = p.Cursor
				return true
			}
		}
		return false
	})
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	close(stop)
	wg.Wait()
	nc.Close()
	if at >= uint64(10*sessions) {
		t.Fatalf("killed after the catch-up had folded all %d events (log at %d): nothing was cut off", 10*sessions, at)
	}
	t.Logf("killed with the session log at %d of %d+ events, %d appended live", at, 10*sessions, appended.Load())

	cmd, done = serve()
	nc, client = connect()
	defer nc.Close()
	js, _ = jetstream.New(nc)
	last, err := events.New(js).LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.WaitFor(ctx, last); err != nil {
		t.Fatalf("catching up to %d after the kill: %v", last, err)
	}
	out, err := exec.CommandContext(ctx, bin, "--data", data, "projections", "verify").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Fatalf("verify after the kill: %v\n%s", err, out)
	}
	// Every event once: each complete session is completed, none refused.
	created := 10*sessions + int(appended.Load())
	done10, err := client.Sessions(ctx, projections.SessionFilter{State: projections.StateCompleted})
	if err != nil {
		t.Fatal(err)
	}
	all, err := client.Sessions(ctx, projections.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < created/10 || len(done10) < created/10 {
		t.Fatalf("%d sessions (%d completed) after the restart, want at least %d", len(all), len(done10), created/10)
	}
	if rs, err := client.Rejections(ctx, projections.RejectionFilter{Limit: 1}); err != nil || len(rs) != 0 {
		t.Fatalf("events refused after the restart (applied twice?): %v %v", rs, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}
