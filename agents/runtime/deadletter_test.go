package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// brokenPrompter fails every prompt node for good: the runner dead-letters
// the dispatch.
type brokenPrompter struct{}

func (brokenPrompter) RunPrompt(context.Context, *agents.Delivery, *schemas.TaskDispatch) ([]*schemas.Envelope, error) {
	return nil, agents.Permanent(errors.New("the prompt cannot be run"))
}

// A node whose dispatch is dead-lettered fails, once and for good: the
// Orchestrator hears of it, skips its dependents, and the DAG ends as failed
// instead of waiting for the node forever.
func TestDeadLetteredDispatchFailsTheNode(t *testing.T) {
	r := newRig(t, func(c *Config) {
		c.Prompter, c.PromptAgents = brokenPrompter{}, ToolAgents()
	})
	id := r.submit("S1", `
name: dead-letter
policy: {retry: {max: 3, backoff: 10ms}}
nodes:
  - {id: think, agent: engineer, prompt: "think hard"}
  - {id: after, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [think]}
  - {id: aside, agent: engineer, tool: exec, args: {argv: ["true"]}}
`)
	dag := r.wait(id)
	got := nodeStates(dag)
	want := map[string]projections.NodeState{"think": projections.NodeFailed, "after": projections.NodeSkipped, "aside": projections.NodeSucceeded}
	for n, st := range want {
		if got[n] != st {
			t.Fatalf("node states %v, want %v", got, want)
		}
	}
	if dag.State != projections.DAGFailed {
		t.Fatalf("DAG %s, want failed", dag.State)
	}
	// One dead letter, one failure, not retried: a permanent error is not
	// worth another attempt.
	brokertest.Eventually(t, 10*time.Second, "the dead_letter event", func() bool {
		return len(r.events(events.Filter{Session: "S1", Type: schemas.TypeDeadLetter})) == 1
	})
	fails := r.events(events.Filter{Session: "S1", Type: schemas.TypeTaskFailed})
	if len(fails) != 1 {
		t.Fatalf("%d task_failed events, want 1", len(fails))
	}
	p, _ := schemas.PayloadAs[schemas.TaskFailed](fails[0])
	if p.NodeID != "think" || p.Retryable || !strings.Contains(p.Error, "dead-lettered") || !strings.Contains(p.Error, "the prompt cannot be run") {
		t.Fatalf("task_failed %+v", p)
	}
	if n := len(r.events(events.Filter{Session: "S1", Type: schemas.TypeNodeRetry})); n != 0 {
		t.Fatalf("%d retries of a dead-lettered node", n)
	}
}
