package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/agents/agentbench"
	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/cmd/sylk/internal/conversation"
	"github.com/sylk/sylk/cmd/sylk/internal/server"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// serveProc is a `sylk serve` process.
type serveProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited, with err
	err  error
}

func startServe(t *testing.T, bin, data, workDir string, flags ...string) *serveProc {
	t.Helper()
	p := launchServe(t, bin, data, workDir, append([]string{"--listen", "127.0.0.1:0", "--sync", "always", "--ack-wait", "2s"}, flags...)...)
	p.waitReady(t, data)
	return p
}

// launchServe starts `sylk --data data serve args...` in workDir, its output
// appended to data.log, without waiting for it to be ready.
func launchServe(t *testing.T, bin, data, workDir string, args ...string) *serveProc {
	t.Helper()
	return launchProc(t, data+".log", workDir, bin, append([]string{"--data", data, "serve"}, args...)...)
}

// launchProc starts bin with args in workDir, its output appended to logPath.
func launchProc(t *testing.T, logPath, workDir, bin string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = workDir
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p
}

// waitReady waits for the process's server.json in data. A killed server
// leaves its server.json behind until the new one replaces it: this waits
// for the new process's own.
func (p *serveProc) waitReady(t *testing.T, data string) {
	t.Helper()
	brokertest.Eventually(t, 60*time.Second, "server.json of the new server", func() bool {
		info, err := broker.ReadInfo(data)
		return err == nil && info.PID == p.cmd.Process.Pid
	})
}

func (p *serveProc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("serve exited with %v", p.err)
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Fatal("serve did not stop on SIGTERM")
	}
}

// TestCrashSafety kills `sylk serve` with SIGKILL at random moments while it
// runs a 52-node DAG whose every tool appends to a file, restarts it each time,
// and checks that nothing is lost and nothing recorded runs twice.
func TestCrashSafety(t *testing.T) {
	t.Parallel() // a long end-to-end run of its own processes, ports and directories
	const nodes, kills = 52, 10
	bin := sylkBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)

	writeChainPlan(t, work, nodes, "0.15")
	srv := startServe(t, bin, data, work)
	submitted := submitPlan(t, bin, data, work)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for k := range kills {
		<-time.After(time.Duration(300+rng.IntN(900)) * time.Millisecond) // a random moment
		srv.kill(t)
		t.Logf("kill %d: %d lines so far", k+1, len(readLines(t, filepath.Join(work, "lines.txt"))))
		srv = startServe(t, bin, data, work)
	}

	info, _ := broker.ReadInfo(data)
	nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	checkChainRun(t, js, submitted.Session, work, nodes, kills)
	nc.Close()
	srv.stop(t)

	// The projections, built live across ten crashes, equal a clean rebuild.
	verifyProjections(t, data)
}

// writeChainPlan writes work/plan.yaml: a chain of nodes engineer tool
// nodes, one at a time, each appending its start and end to lines.txt with a
// sleep of the given seconds between.
func writeChainPlan(t *testing.T, work string, nodes int, sleep string) {
	t.Helper()
	var plan strings.Builder
	plan.WriteString("name: crash\npolicy: {max_concurrency: 1}\nnodes:\n")
	for i := range nodes {
		fmt.Fprintf(&plan, "  - {id: n%02d, agent: engineer, tool: exec, args: {argv: [sh, -c, 'echo start n%02d >> lines.txt; sleep %s; echo end n%02d >> lines.txt']}", i, i, sleep, i)
		if i > 0 {
			fmt.Fprintf(&plan, ", depends_on: [n%02d]", i-1)
		}
		plan.WriteString("}\n")
	}
	if err := os.WriteFile(filepath.Join(work, "plan.yaml"), []byte(plan.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// submitPlan submits work/plan.yaml to the server of data (or the one the
// global flags name), detached.
func submitPlan(t *testing.T, bin, data, work string, flags ...string) conversation.Outcome {
	t.Helper()
	run := exec.Command(bin, append(append([]string{"--data", data}, flags...), "run", "plan.yaml", "--detach", "--json")...)
	run.Dir = work
	out, err := run.Output()
	if err != nil {
		t.Fatalf("sylk run --detach: %v\n%s", err, out)
	}
	var submitted conversation.Outcome
	if err := json.Unmarshal(out, &submitted); err != nil {
		t.Fatal(err)
	}
	return submitted
}

// checkChainRun waits for the chain of writeChainPlan to succeed in session
// and checks that every node ran to the end, that a node ran again only
// when a kill cut its run off before its result was recorded (at most one
// repeat per kill), that nothing is left unacked and that the DLQ is empty.
func checkChainRun(t *testing.T, js jetstream.JetStream, session, work string, nodes, kills int) {
	t.Helper()
	log := events.New(js)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var outcome *schemas.WorkflowComplete
	brokertest.Eventually(t, 3*time.Minute, "the DAG completes after the kills", func() bool {
		evs, err := log.Read(ctx, events.Filter{Session: session, Type: schemas.TypeWorkflowComplete}.Subject(), events.Cursor{}, 0)
		if err != nil {
			t.Logf("read the outcome: %v", err)
		}
		if err != nil || len(evs) == 0 {
			return false
		}
		outcome, _ = schemas.PayloadAs[schemas.WorkflowComplete](evs[0].Env)
		return true
	})
	if outcome.Outcome != schemas.OutcomeSucceeded || outcome.Succeeded != nodes {
		t.Fatalf("outcome %+v", outcome)
	}

	// Every node's line is in the file; a node started more than once only if
	// its earlier attempt was cut off by a kill before its result was recorded.
	starts := map[string]int{}
	ends := map[string]int{}
	for _, l := range readLines(t, filepath.Join(work, "lines.txt")) {
		f := strings.Fields(l)
		if f[0] == "start" {
			starts[f[1]]++
		} else {
			ends[f[1]]++
		}
	}
	calls := map[string][]bool{} // node -> per tool_call: was its result recorded before the next call?
	evs, err := log.Read(ctx, events.Filter{Session: session}.Subject(), events.Cursor{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]bool{}
	for _, ev := range evs {
		switch ev.Env.Type {
		case schemas.TypeToolCall:
			p, _ := schemas.PayloadAs[schemas.ToolCall](ev.Env)
			calls[p.NodeID] = append(calls[p.NodeID], false)
		case schemas.TypeToolResult:
			p, _ := schemas.PayloadAs[schemas.ToolResult](ev.Env)
			if results[p.CallID] {
				t.Errorf("call %s has two results", p.CallID)
			}
			results[p.CallID] = true
			c := calls[p.NodeID]
			c[len(c)-1] = true
		}
	}
	repeats := 0
	for i := range nodes {
		id := fmt.Sprintf("n%02d", i)
		if starts[id] == 0 || ends[id] == 0 {
			t.Errorf("node %s never ran to the end: %d starts, %d ends", id, starts[id], ends[id])
		}
		// A kill between recording a call and the tool's first line leaves a
		// record without a run; the reverse, a run without a record, is a bug.
		c := calls[id]
		if starts[id] > len(c) {
			t.Errorf("node %s: %d runs but %d tool_call events: a run without its record", id, starts[id], len(c))
		}
		for j, recorded := range c {
			if recorded && j != len(c)-1 {
				t.Errorf("node %s ran again after its result was recorded (call %d of %d)", id, j+1, len(c))
			}
			if !recorded && j == len(c)-1 {
				t.Errorf("node %s: its last run has no recorded result", id)
			}
		}
		repeats += len(c) - 1
	}
	if repeats > kills {
		t.Errorf("%d repeated runs for %d kills: with max_concurrency 1 at most one per kill", repeats, kills)
	}
	t.Logf("%d kills, %d interrupted runs repeated", kills, repeats)

	// Nothing left unacked, nothing dead-lettered.
	brokertest.Eventually(t, 30*time.Second, "every agent consumer drained", func() bool {
		s, err := js.Stream(ctx, broker.Stream)
		if err != nil {
			return false
		}
		lister := s.ListConsumers(ctx)
		for c := range lister.Info() {
			if strings.HasPrefix(c.Name, "agent-") && (c.NumPending > 0 || c.NumAckPending > 0) {
				return false
			}
		}
		return lister.Err() == nil
	})
	if s, err := js.Stream(ctx, broker.DLQStream); err != nil {
		t.Fatal(err)
	} else if info, _ := s.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d dead letters", info.State.Msgs)
	}
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// verifyProjections rebuilds the projections in memory from the stream and
// compares them with the store on disk.
func verifyProjections(t *testing.T, data string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := broker.Start(ctx, broker.Options{DataDir: data, Listen: broker.ListenNone, Sync: broker.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	verifyStore(t, data, events.New(b.JetStream()))
}

// verifyStore catches the projections of data up with log, then rebuilds
// them in memory from it and compares.
func verifyStore(t *testing.T, data string, log *events.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := projections.Open(ctx, projections.Options{Dir: server.ProjectionsDir(data)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Projector(log).CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	report, err := store.Verify(ctx, log)
	if err != nil {
		t.Fatal(err)
	}
	if report.Difference != nil || report.Keys == 0 {
		t.Fatalf("projections differ from a clean rebuild: %d keys compared, first difference %+v", report.Keys, report.Difference)
	}
}

// TestPromptResume kills the only server (`sylk serve`, default settings)
// while a node's tool runs and starts it again: the interrupted node completes
// within agentbench.ResumeBudget of the restart, not after a long ack wait.
func TestPromptResume(t *testing.T) {
	bin := sylkBinary(t) // built first: under load the build alone can take minutes
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := agentbench.Resume(ctx, agentbench.ResumeConfig{Bin: bin, DataDir: t.TempDir(), Kills: 1}, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Max > agentbench.ResumeBudget {
		t.Fatalf("the interrupted node completed %.2fs after the restart (budget %.0fs)", rep.Max, agentbench.ResumeBudget)
	}
	t.Logf("resumed in %.2fs", rep.Max)
}
