package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/sylk/sylk/schemas"
)

// dagStream is the DAGs' share of a rebuild's stream: sessions interleaved
// round-robin like projbench's, each running projbench's 8-node DAG in four
// layers (every node dispatched, one tool call and its result, completed;
// every layer checkpointed), then its workflow's end and a status report.
func dagStream(b *testing.B, sessions int) []*event {
	var evs []*event
	add := eventAdder(b, &evs)
	node := func(n int) string { return fmt.Sprintf("n%d", n) }
	// A layer is nine steps: two dispatches, two calls, two results, two
	// completions, a checkpoint.
	const steps = 1 + 4*9 + 2
	for k := range steps {
		for i := range sessions {
			s := fmt.Sprintf("bs%06d", i)
			dag := "dag-" + s
			if k == 0 {
				spec := schemas.DAG{ID: dag, Name: "build and test " + s}
				for n := range 8 {
					sn := schemas.Node{ID: node(n), Agent: "engineer", Tool: "exec", Args: map[string]any{"argv": []any{"go", "test", "./pkg" + fmt.Sprint(n)}}}
					if n >= 2 {
						prev := 2 * (n/2 - 1)
						sn.DependsOn = []string{node(prev), node(prev + 1)}
					}
					spec.Nodes = append(spec.Nodes, sn)
				}
				add(s, schemas.TypeDAGExecute, "architect", schemas.DAGExecute{DAG: spec})
				continue
			}
			if k == steps-2 {
				add(s, schemas.TypeWorkflowComplete, "orchestrator", schemas.WorkflowComplete{DAGID: dag, Outcome: schemas.OutcomeSucceeded, Summary: "8 of 8 nodes succeeded", Succeeded: 8, Duration: 42 * time.Second})
				continue
			}
			if k == steps-1 {
				add(s, schemas.TypeDAGStatus, "orchestrator", schemas.DAGStatus{DAGID: dag, State: "succeeded", Layer: 4, Counts: map[string]int{"succeeded": 8}})
				continue
			}
			layer, step := (k-1)/9, (k-1)%9
			n := node(2*layer + step%2)
			call := fmt.Sprintf("call-%s-%s", s, n)
			switch step / 2 {
			case 0:
				add(s, schemas.TypeTaskDispatch, "orchestrator", schemas.TaskDispatch{DAGID: dag, NodeID: n, Attempt: 1, Agent: "engineer", Tool: "exec"})
			case 1:
				add(s, schemas.TypeToolCall, "engineer", schemas.ToolCall{CallID: call, Tool: "exec", DAGID: dag, NodeID: n, Attempt: 1})
			case 2:
				add(s, schemas.TypeToolResult, "engineer", schemas.ToolResult{CallID: call, Tool: "exec", OK: true, DurationMS: 412, DAGID: dag, NodeID: n, Attempt: 1})
			case 3:
				add(s, schemas.TypeTaskComplete, "engineer", schemas.TaskComplete{DAGID: dag, NodeID: n, Attempt: 1, CallID: call, Summary: "tests pass", Evidence: "PASS: 14 tests"})
			default:
				add(s, schemas.TypeCheckpoint, "orchestrator", schemas.Checkpoint{DAGID: dag, Layer: layer, Succeeded: []string{node(2 * layer), node(2*layer + 1)}})
			}
		}
	}
	return evs
}

// BenchmarkDAGFold folds the DAG events of 4000 sessions into an empty store
// as a rebuild does (see BenchmarkAuditFold). live-B/session is the heap the
// fold's cached DAGs hold, one a session.
// go test -run X -bench DAGFold -benchmem ./projections
func BenchmarkDAGFold(b *testing.B) {
	foldEvents(b, applyDAGs, DAGs, dagStream(b, 4000), 50_000, 250_000, true)
}

// BenchmarkDAGLive folds the same events as a live projector does, in batches
// of a few events each written with the DAGs it changed.
// go test -run X -bench DAGLive -benchmem ./projections
func BenchmarkDAGLive(b *testing.B) {
	evs := dagStream(b, 400)
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { foldEvents(b, applyDAGs, DAGs, evs, n, n, false) })
	}
}
