// Package projbench measures the projections against their raw baselines in
// the same run: a rebuild against a bare ordered-consumer read of the stream
// and bare Pebble batched writes of the same keys; a session replay against a
// subject-filtered ordered consumer reading the same session; and start-up
// after a clean stop. `go test -bench` and `sylk bench rebuild|replay` run the
// same functions and report eventbench comparisons.
package projbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// PerSession is how many events each generated session has.
const PerSession = 50

// SessionID is the id of the i-th generated session.
func SessionID(i int) string { return fmt.Sprintf("bs%06d", i) }

// script returns the k-th event of session i: a realistic session of exactly
// PerSession events. The user asks, the Architect plans an 8-node DAG in four
// layers (with a recorded LLM call), the user approves, each node is
// dispatched, runs one tool and completes, each layer is checkpointed, the
// workflow completes and the session is completed.
func script(i, k int, ts time.Time) (*schemas.Envelope, error) {
	s := SessionID(i)
	dag := "dag-" + s
	node := func(n int) string { return fmt.Sprintf("n%d", n) }
	ev := func(t schemas.Type, source, target string, p any) (*schemas.Envelope, error) {
		return schemas.New(t, s, source, target, ts, p)
	}
	spec := schemas.DAG{ID: dag, Name: "build and test " + s}
	for n := range 8 {
		sn := schemas.Node{ID: node(n), Agent: "engineer", Tool: "exec", Args: map[string]any{"argv": []any{"go", "test", "./pkg" + strconv.Itoa(n)}}}
		if n >= 2 {
			prev := 2 * (n/2 - 1) // both nodes of the layer before
			sn.DependsOn = []string{node(prev), node(prev + 1)}
		}
		spec.Nodes = append(spec.Nodes, sn)
	}
	switch {
	case k == 0:
		return ev(schemas.TypeSessionCreate, "user", "", schemas.SessionCreate{Name: "bench " + s})
	case k == 1:
		return ev(schemas.TypeSessionResume, "user", "", schemas.SessionResume{})
	case k == 2:
		return ev(schemas.TypeUserInput, "user", "", schemas.UserInput{Text: "make the tests in ./pkg pass and keep the API stable"})
	case k == 3:
		return ev(schemas.TypePlanRequest, "guide", "architect", schemas.PlanRequest{Request: "make the tests in ./pkg pass and keep the API stable"})
	case k == 4:
		return ev(schemas.TypeLLMRequest, "architect", "", schemas.LLMRequest{CallID: "llm-" + s, Agent: "architect", Model: "bench-model", MessagesDigest: "sha256:" + strings.Repeat("ab", 32), EstimatedTokens: 900, BudgetChecked: true})
	case k == 5:
		return ev(schemas.TypeLLMResponse, "architect", "", schemas.LLMResponse{CallID: "llm-" + s, Model: "bench-model", Content: "A plan of eight steps in four layers.", Usage: schemas.Usage{PromptTokens: 900, CompletionTokens: 120, TotalTokens: 1020}, LatencyMS: 800})
	case k == 6:
		return ev(schemas.TypeLLMUsage, "architect", "", schemas.LLMUsage{CallID: "llm-" + s, Agent: "architect", Model: "bench-model", Usage: schemas.Usage{PromptTokens: 900, CompletionTokens: 120, TotalTokens: 1020}})
	case k == 7:
		return ev(schemas.TypePlanResponse, "architect", "user", schemas.PlanResponse{PlanID: "plan-" + s, DAG: spec, Rationale: "build, then test each package"})
	case k == 8:
		return ev(schemas.TypePlanApproved, "user", "architect", schemas.PlanApproved{PlanID: "plan-" + s})
	case k == 9:
		return ev(schemas.TypeDAGExecute, "architect", "orchestrator", schemas.DAGExecute{DAG: spec})
	case k < 46:
		// Four layers of two nodes: 4 events per node, then a checkpoint.
		j := k - 10
		layer, r := j/9, j%9
		if r == 8 {
			return ev(schemas.TypeCheckpoint, "orchestrator", "", schemas.Checkpoint{DAGID: dag, Layer: layer, Succeeded: []string{node(2 * layer), node(2*layer + 1)}})
		}
		n := 2*layer + r/4
		call := fmt.Sprintf("call-%s-%d", s, n)
		switch r % 4 {
		case 0:
			return ev(schemas.TypeTaskDispatch, "orchestrator", "engineer", schemas.TaskDispatch{DAGID: dag, NodeID: node(n), Attempt: 1, Agent: "engineer", Tool: "exec", Args: map[string]any{"argv": []any{"go", "test", "./pkg" + strconv.Itoa(n)}}})
		case 1:
			return ev(schemas.TypeToolCall, "engineer", "", schemas.ToolCall{CallID: call, Tool: "exec", DAGID: dag, NodeID: node(n), Attempt: 1})
		case 2:
			return ev(schemas.TypeToolResult, "engineer", "", schemas.ToolResult{CallID: call, Tool: "exec", OK: true, Stdout: "ok  \texample.com/pkg" + strconv.Itoa(n) + "\t0.012s\nPASS: 14 tests, 0 failures, coverage 81.3% of statements", StdoutBytes: 96, DurationMS: 412, DAGID: dag, NodeID: node(n), Attempt: 1})
		default:
			return ev(schemas.TypeTaskComplete, "engineer", "orchestrator", schemas.TaskComplete{DAGID: dag, NodeID: node(n), Attempt: 1, CallID: call, Summary: "tests pass", Evidence: "PASS: 14 tests"})
		}
	case k == 46:
		return ev(schemas.TypeWorkflowComplete, "orchestrator", "user", schemas.WorkflowComplete{DAGID: dag, Outcome: schemas.OutcomeSucceeded, Summary: "8 of 8 nodes succeeded", Succeeded: 8, Duration: 42 * time.Second})
	case k == 47:
		return ev(schemas.TypeDAGStatus, "orchestrator", "user", schemas.DAGStatus{DAGID: dag, State: "succeeded", Layer: 4, Counts: map[string]int{"succeeded": 8}})
	case k == 48:
		return ev(schemas.TypeSessionContextSet, "user", "", schemas.SessionContextSet{CurrentTask: "tests", CompletedSteps: []string{"plan", "build", "test"}, ModifiedFiles: []string{"pkg/a.go", "pkg/b.go"}})
	case k == 49:
		return ev(schemas.TypeSessionComplete, "user", "", schemas.SessionComplete{Summary: "all tests pass"})
	}
	return nil, fmt.Errorf("event %d of a session: sessions have %d", k, PerSession)
}

// Dataset is a data directory with a generated stream.
type Dataset struct {
	Dir      string
	Events   int
	Sessions int
}

// Generate fills a fresh data directory under dir with n events: n/50
// sessions of the script, interleaved round-robin (event k of every session,
// then event k+1), appended with AppendAsync on an interval-sync server. A
// directory generated before with the same n is reused.
func Generate(ctx context.Context, dir string, n int, progress func(string)) (*Dataset, error) {
	if n < PerSession {
		return nil, fmt.Errorf("%d events: at least %d, one session", n, PerSession)
	}
	sessions := n / PerSession
	n = sessions * PerSession
	d := &Dataset{Dir: filepath.Join(dir, fmt.Sprintf("stream-%d", n)), Events: n, Sessions: sessions}
	marker := filepath.Join(d.Dir, "generated")
	if _, err := os.Stat(marker); err == nil {
		return d, nil
	}
	if err := os.RemoveAll(d.Dir); err != nil {
		return nil, err
	}
	b, err := d.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	log := events.New(b.JetStream())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	next := time.Now()
	for k := range PerSession {
		for i := range sessions {
			env, err := script(i, k, base.Add(time.Duration(k*sessions+i)*time.Millisecond))
			if err != nil {
				return nil, err
			}
			if _, err := log.AppendAsync(env); err != nil {
				return nil, err
			}
		}
		if progress != nil && time.Now().After(next) {
			progress(fmt.Sprintf("generating %d events: %d%%", n, (k+1)*100/PerSession))
			next = time.Now().Add(2 * time.Second)
		}
	}
	if err := log.Flush(ctx); err != nil {
		return nil, err
	}
	last, err := log.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if last != uint64(n) {
		return nil, fmt.Errorf("generated %d events, the stream holds %d", n, last)
	}
	return d, os.WriteFile(marker, []byte(strconv.Itoa(n)), 0o644)
}

// Start starts an embedded interval-sync broker on the dataset.
func (d *Dataset) Start(ctx context.Context) (*broker.Broker, error) {
	return broker.Start(ctx, broker.Options{DataDir: d.Dir, Listen: broker.ListenNone, Sync: broker.SyncInterval, Name: "projbench"})
}

// GenerateStarted generates (or reuses) a stream of n events in dir, as
// Generate does, and starts its server. Close the broker.
func GenerateStarted(ctx context.Context, dir string, n int, progress func(string)) (*Dataset, *broker.Broker, error) {
	ds, err := Generate(ctx, dir, n, progress)
	if err != nil {
		return nil, nil, err
	}
	b, err := ds.Start(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ds, b, nil
}
