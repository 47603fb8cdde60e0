package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/hooks"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// BenchmarkToolHooks measures ten in-process hooks around a tool call (five
// at pre_tool, permission_check and git_permissions among them; five at
// post_tool, redact_secrets among them; the recorded decision looked up in a
// Pebble store) against the bare tool layer running `exec true`, alternating
// in the same loop so both see the same machine. hooks/exec is the hooks'
// share of the call; the target is at most 0.05.
func BenchmarkToolHooks(b *testing.B) {
	ctx := context.Background()
	e, err := tools.NewExecutor(tools.Options{WorkDir: b.TempDir(), Permissions: tools.DefaultPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	store, err := projections.Open(ctx, projections.Options{Dir: "projections", FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	policy := tools.DefaultPolicy()
	hs := hooks.Builtins{Policy: &policy, Redactor: e.Redactor()}.Hooks()
	for i := range 3 {
		hs = append(hs, hooks.Hook{Name: fmt.Sprintf("pre%d", i), Point: hooks.PreTool, Priority: hooks.Normal, Trigger: []string{"exec"},
			Run: func(_ context.Context, d *hooks.Data) (hooks.Decision, error) {
				if _, ok := d.Args["argv"]; !ok {
					return hooks.Decision{Action: hooks.Block, Reason: "argv only"}, nil
				}
				return hooks.Decision{}, nil
			}})
	}
	for i := range 4 {
		hs = append(hs, hooks.Hook{Name: fmt.Sprintf("post%d", i), Point: hooks.PostTool, Priority: hooks.Priority(10 * i),
			Run: func(_ context.Context, d *hooks.Data) (hooks.Decision, error) {
				if !d.Result.OK {
					return hooks.Decision{Context: "it failed"}, nil
				}
				return hooks.Decision{}, nil
			}})
	}
	p, err := hooks.New(store, hs...)
	if err != nil {
		b.Fatal(err)
	}
	if pre, post := len(p.Order(hooks.PreTool)), len(p.Order(hooks.PostTool)); pre != 5 || post != 5 {
		b.Fatalf("%d pre_tool and %d post_tool hooks, want 5 and 5", pre, post)
	}
	env, err := schemas.New(schemas.TypeTaskDispatch, "S1", "orchestrator", "engineer", time.Now(), schemas.TaskDispatch{DAGID: "d", NodeID: "n"})
	if err != nil {
		b.Fatal(err)
	}
	d := &agents.Delivery{Env: env, Agent: "engineer", Attempt: 1}
	call := tools.Call{ID: "bench", Tool: tools.ToolExec, Args: json.RawMessage(`{"argv":["true"]}`)}
	args := map[string]any{"argv": []any{"true"}}
	var res tools.Result
	recorded := func(context.Context, map[string]any) (schemas.ToolResult, error) {
		return agents.ToolResultOf(res), nil
	}
	show := func(r schemas.ToolResult) string { return r.Summary }
	var exec, hooked time.Duration
	for b.Loop() {
		t0 := time.Now()
		if res, err = e.Run(ctx, "engineer", call); err != nil || !res.OK {
			b.Fatalf("%v %+v", err, res)
		}
		t1 := time.Now()
		if _, _, err := p.Tool(ctx, d, "bench", hooks.Task{}, tools.ToolExec, args, recorded, show); err != nil {
			b.Fatal(err)
		}
		hooked += time.Since(t1)
		exec += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(exec.Nanoseconds())/n, "exec-ns/op")
	b.ReportMetric(float64(hooked.Nanoseconds())/n, "hooks-ns/op")
	b.ReportMetric(float64(hooked)/float64(exec), "hooks/exec")
	b.ReportMetric(0.05, "target")
}
