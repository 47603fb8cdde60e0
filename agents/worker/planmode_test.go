package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
)

// A tool node in a session in plan mode: a write is refused with the plan
// mode's reason and changes nothing; a read runs (and, being read-only,
// runs without the plan mode being read).
func TestToolNodesInPlanMode(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	w := &Worker{Agent: "engineer", Executors: f.pl.Executors, Records: f.Store, Judge: ByExit, Plans: f.Store}
	f.Run("engineer", agents.HandlerFunc(w.Handle))
	f.Send("S1", "user", "", schemas.TypePlanEnter, schemas.PlanEnter{Reason: "look first"})
	f.Eventually(10*time.Second, "S1 in plan mode", func() bool {
		pm, err := f.Store.PlanMode(context.Background(), "S1")
		return err == nil && schemas.PlanReadOnly(pm.State)
	})

	node := func(id, tool string, args map[string]any) {
		f.Send("S1", "orchestrator", "engineer", schemas.TypeTaskDispatch, schemas.TaskDispatch{
			DAGID: "d1", NodeID: id, Attempt: 1, Agent: "engineer", Tool: tool, Args: args, WorkDir: f.dir,
		})
	}
	node("write", "write_file", map[string]any{"path": "made.txt", "content": "x"})
	node("read", "list", map[string]any{"path": "."})
	f.Eventually(20*time.Second, "both nodes' outcomes", func() bool {
		return f.Count(schemas.TypeTaskComplete)+f.Count(schemas.TypeTaskFailed) == 2 && f.Idle("engineer")
	})
	failed := f.Events(schemas.TypeTaskFailed)
	if len(failed) != 1 {
		t.Fatalf("%d failed nodes, want the write", len(failed))
	}
	p, err := schemas.PayloadAs[schemas.TaskFailed](failed[0])
	if err != nil || p.NodeID != "write" || !strings.Contains(p.Error, "plan mode (exploring)") || !strings.Contains(p.Error, "write_file changes files") {
		t.Fatalf("the write failed with %+v, %v", p, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made.txt")); !os.IsNotExist(err) {
		t.Fatalf("the refused write made a file: %v", err)
	}
	done := f.Events(schemas.TypeTaskComplete)
	if c, err := schemas.PayloadAs[schemas.TaskComplete](done[0]); err != nil || c.NodeID != "read" {
		t.Fatalf("completed %+v, %v; want the read", c, err)
	}
}
