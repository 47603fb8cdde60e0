package agentbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

// ResumeBudget is the most seconds from a restart to the interrupted node's
// completion.
const ResumeBudget = 5.0

// ResumeConfig sizes the resume benchmark.
type ResumeConfig struct {
	// Bin is the sylk binary to run `serve` with.
	Bin     string
	DataDir string
	// Kills is how many times the server is killed (default 3).
	Kills int
}

// ResumeReport is what the resume benchmark measures: for each kill, the
// seconds from starting the new server to the interrupted node completing.
type ResumeReport struct {
	Seconds     []float64               `json:"seconds"`
	Max         float64                 `json:"max_seconds"`
	Comparisons []eventbench.Comparison `json:"comparisons"`
}

// Resume runs a chain of tool nodes on a `sylk serve` process of cfg.Bin (the
// only server: broker, projections and agents, default ack wait), SIGKILLs it
// while a node's tool runs, starts it again at once and times how long the
// interrupted node takes to complete. It repeats that cfg.Kills times.
func Resume(ctx context.Context, cfg ResumeConfig, progress func(string)) (*ResumeReport, error) {
	if cfg.Kills == 0 {
		cfg.Kills = 3
	}
	data, work := filepath.Join(cfg.DataDir, "resume"), filepath.Join(cfg.DataDir, "resume-work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	srv, err := startServe(ctx, cfg.Bin, data, work)
	if err != nil {
		return nil, err
	}
	defer func() { srv.kill() }()
	dag := schemas.DAG{ID: "resume", Name: "resume", Policy: schemas.Policy{MaxConcurrency: 1}}
	for i := range cfg.Kills + 1 {
		n := schemas.Node{ID: fmt.Sprintf("n%d", i), Agent: "engineer", Tool: "exec", Args: map[string]any{"argv": []any{"sleep", "1"}}}
		if i > 0 {
			n.DependsOn = []string{fmt.Sprintf("n%d", i-1)}
		}
		dag.Nodes = append(dag.Nodes, n)
	}
	create, _ := schemas.New(schemas.TypeSessionCreate, "resume", "user", "", time.Now(), schemas.SessionCreate{Name: "resume"})
	resume, _ := create.Derive(schemas.TypeSessionResume, "user", "", time.Now(), schemas.SessionResume{})
	exec, err := schemas.New(schemas.TypeDAGExecute, "resume", "user", "orchestrator", time.Now(), schemas.DAGExecute{DAG: dag, WorkDir: work})
	if err != nil {
		return nil, err
	}
	if err := srv.do(ctx, func(log *events.Log) (bool, error) {
		_, err := log.AppendBatch(ctx, []*schemas.Envelope{create, resume, exec})
		return err == nil, err
	}); err != nil {
		return nil, err
	}
	rep := &ResumeReport{}
	for k := range cfg.Kills {
		node := fmt.Sprintf("n%d", k)
		if progress != nil {
			progress(fmt.Sprintf("kill %d of %d, while %s runs", k+1, cfg.Kills, node))
		}
		if err := srv.until(ctx, 60*time.Second, func(log *events.Log) (bool, error) {
			return nodeEvent(ctx, log, schemas.TypeToolCall, node)
		}); err != nil {
			return nil, fmt.Errorf("waiting for %s to start: %w", node, err)
		}
		srv.kill()
		start := time.Now()
		if srv, err = startServe(ctx, cfg.Bin, data, work); err != nil {
			return nil, err
		}
		if err := srv.until(ctx, 60*time.Second, func(log *events.Log) (bool, error) {
			return nodeEvent(ctx, log, schemas.TypeTaskComplete, node)
		}); err != nil {
			return nil, fmt.Errorf("waiting for %s to complete after the restart: %w", node, err)
		}
		s := time.Since(start).Seconds()
		rep.Seconds = append(rep.Seconds, s)
		rep.Max = max(rep.Max, s)
	}
	rep.Comparisons = []eventbench.Comparison{eventbench.Compare("restart to the interrupted node's completion (slowest) vs 5 s budget",
		eventbench.Measure{Name: fmt.Sprintf("%d kills of the only server", cfg.Kills), Ops: 1, Seconds: rep.Max, PerSec: 1 / rep.Max},
		eventbench.Measure{Name: "budget: 5 s", Ops: 1, Seconds: ResumeBudget, PerSec: 1 / ResumeBudget}, 1)}
	return rep, nil
}

// nodeEvent reports whether the stream holds an event of type t for node.
func nodeEvent(ctx context.Context, log *events.Log, t schemas.Type, node string) (bool, error) {
	evs, err := log.Read(ctx, events.Filter{Session: "resume", Type: t}.Subject(), events.Cursor{}, 0)
	if err != nil {
		return false, err
	}
	for _, ev := range evs {
		if ev.Env == nil {
			continue
		}
		var id string
		switch t {
		case schemas.TypeToolCall:
			p, err := schemas.PayloadAs[schemas.ToolCall](ev.Env)
			if err != nil {
				return false, err
			}
			id = p.NodeID
		default:
			p, err := schemas.PayloadAs[schemas.TaskComplete](ev.Env)
			if err != nil {
				return false, err
			}
			id = p.NodeID
		}
		if id == node {
			return true, nil
		}
	}
	return false, nil
}

// serveProc is a `sylk serve` process on a data directory.
type serveProc struct {
	cmd  *exec.Cmd
	data string
	done chan error
}

// startServe starts `bin serve` on data, listening on a free loopback port,
// and returns once it has written its server.json.
func startServe(ctx context.Context, bin, data, work string) (*serveProc, error) {
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(data+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--data", data, "serve", "--listen", "127.0.0.1:0")
	cmd.Dir, cmd.Stdout, cmd.Stderr = work, logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serveProc{cmd: cmd, data: data, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if info, err := broker.ReadInfo(data); err == nil && info.PID == cmd.Process.Pid {
			return p, nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Errorf("sylk serve exited at start (%v): see %s.log", err, data)
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("sylk serve wrote no server.json within a minute: see %s.log", data)
		}
	}
}

// kill SIGKILLs the process and waits for it.
func (p *serveProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// do connects to the server and calls fn with its event log once.
func (p *serveProc) do(ctx context.Context, fn func(*events.Log) (bool, error)) error {
	b, err := broker.Connect(ctx, broker.Options{DataDir: p.data, Name: "sylk-bench-resume"})
	if err != nil {
		return err
	}
	defer b.Close()
	_, err = fn(events.New(b.JetStream()))
	return err
}

// until polls fn every 20 ms until it returns true, within d.
func (p *serveProc) until(ctx context.Context, d time.Duration, fn func(*events.Log) (bool, error)) error {
	deadline := time.Now().Add(d)
	return p.do(ctx, func(log *events.Log) (bool, error) {
		for {
			ok, err := fn(log)
			if ok || err != nil {
				return ok, err
			}
			if time.Now().After(deadline) {
				return false, fmt.Errorf("not within %s", d)
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
}
