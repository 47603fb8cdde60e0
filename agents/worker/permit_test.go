package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/agents/permit"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// An engineer limited to `cat` runs a safe-list command at once, waits for
// the user on the others, resumes on the decision, reuses an answer for the
// session, and is shown a denial (recorded as an audit record) without the
// command running.
func TestPermissionRequestsWaitForTheUser(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	policy := tools.DefaultPolicy().WithCommands("engineer", "cat")
	f.pl.Executors = &Executors{Options: tools.Options{Permissions: policy}}
	f.pl.Permits = &permit.Gate{Policy: policy, Store: f.Store, Poll: 10 * time.Millisecond}
	f.srv.Script(
		llmtest.Tools(call("c1", "exec", `{"argv": ["ls"]}`)),
		llmtest.Tools(call("c2", "exec", `{"argv": ["touch", "made.txt"]}`)),
		llmtest.Tools(call("c3", "exec", `{"argv": ["touch", "again.txt"]}`)),
		llmtest.Tools(call("c4", "exec", `{"argv": ["rm", "made.txt"]}`)),
		llmtest.Text("made the files; removing was denied"),
	)
	f.worker("engineer", false)
	f.dispatch("engineer", "make two files, then remove one")

	first := f.awaitRequest(1)
	if first.Target != "touch made.txt" || first.Grant != "touch" || first.Agent != "engineer" || !strings.Contains(first.Reason, `may run only "cat"`) {
		t.Fatalf("first request %+v", first)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made.txt")); !os.IsNotExist(err) {
		t.Fatalf("touch ran before the decision: %v", err)
	}
	f.Send("S1", "user", "engineer", schemas.TypePermissionDecision, schemas.PermissionDecision{
		RequestID: first.ID, Decision: schemas.DecisionAllow, Scope: schemas.PermitSession})

	second := f.awaitRequest(2)
	if second.Target != "rm made.txt" || second.Grant != "rm" {
		t.Fatalf("second request %+v (touch again.txt should have used the session's answer)", second)
	}
	f.Send("S1", "user", "engineer", schemas.TypePermissionDecision, schemas.PermissionDecision{
		RequestID: second.ID, Decision: schemas.DecisionDeny, Scope: schemas.PermitOnce, Reason: "keep it"})

	out := f.outcome("engineer")
	if out.Type != schemas.TypeTaskComplete {
		t.Fatalf("outcome %s", out.Type)
	}
	for _, name := range []string{"made.txt", "again.txt"} {
		if _, err := os.Stat(filepath.Join(f.dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	reqs := f.srv.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.ToolCallID != "c4" || !strings.Contains(m.Content, `permission denied: the user denied "rm made.txt": keep it`) {
		t.Fatalf("the model was shown %+v", m)
	}
	if n := f.Count(schemas.TypePermissionRequest); n != 2 {
		t.Fatalf("%d permission requests, want 2", n)
	}
	audits := llmtest.Payloads[schemas.AuditRecord](f.Stack, schemas.TypeAuditRecord)
	if len(audits) != 1 || audits[0].Outcome != schemas.OutcomeDenied || audits[0].Target != "rm made.txt" || audits[0].Details["source"] != permit.SourceUser {
		t.Fatalf("audit records %+v", audits)
	}
	// Three commands ran (ls, touch, touch); rm did not.
	if n := f.Count(schemas.TypeToolResult); n != 3 {
		t.Fatalf("%d tool results, want 3", n)
	}
}

// awaitRequest waits for the n-th permission request and returns it as the
// projection holds it, still open.
func (f *promptFixture) awaitRequest(n int) *projections.Permit {
	f.t.Helper()
	var open []*projections.Permit
	f.Eventually(20*time.Second, "permission request to wait on the user", func() bool {
		all, err := f.Store.Permits(f.Ctx, projections.PermitFilter{Session: "S1"})
		if err != nil {
			f.t.Fatal(err)
		}
		open = nil
		for _, p := range all {
			if p.State == projections.PermitOpen {
				open = append(open, p)
			}
		}
		return len(all) == n && len(open) == 1
	})
	return open[0]
}
