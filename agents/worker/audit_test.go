package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// The tools' audit records: a file written (size and SHA-256), a process
// killed (pid and signals), a sensitive file not shown, a call the executor
// denied. Each is appended once with the call's result, a redelivery after a
// crash adds none, and the audit projection files them.
func TestToolCallsAppendAuditRecordsOnce(t *testing.T) {
	f := newPromptFixture(t, Limits{})
	if err := os.WriteFile(filepath.Join(f.dir, ".env"), []byte("TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		llmtest.Tools(call("c1", "write_file", `{"path": "hello.txt", "content": "hi\n"}`)),
		llmtest.Tools(call("c2", "edit_file", `{"path": "hello.txt", "old_text": "hi", "new_text": "hello"}`)),
		llmtest.Tools(call("c3", "exec", `{"argv": ["sleep", "30"], "timeout": 0.2}`)),
		llmtest.Tools(call("c4", "read_file", `{"path": ".env"}`)),
		llmtest.Tools(call("c5", "write_file", `{"path": "../outside.txt", "content": "x"}`)),
		llmtest.Text("done"),
	)
	deliveries := f.worker("engineer", true)
	f.dispatch("engineer", "write, edit, wait, read the env, write outside")
	if out := f.outcome("engineer"); out.Type != schemas.TypeTaskComplete || deliveries.Load() != 2 {
		t.Fatalf("outcome %s after %d deliveries", out.Type, deliveries.Load())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.dir), "outside.txt")); !os.IsNotExist(err) {
		t.Fatalf("the write outside the work directory happened: %v", err)
	}

	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	recs := llmtest.Payloads[schemas.AuditRecord](f.Stack, schemas.TypeAuditRecord)
	byAction := map[string]*schemas.AuditRecord{}
	for _, r := range recs {
		if byAction[r.Action] != nil {
			t.Fatalf("two %s records: %+v", r.Action, recs)
		}
		byAction[r.Action] = r
	}
	if len(recs) != 5 {
		t.Fatalf("%d audit records, want 5: %+v", len(recs), recs)
	}
	if c := byAction["create"]; c == nil || c.Category != schemas.AuditFile || c.Target != "hello.txt" || c.Details["size"] != "3" || c.Details["sha256"] != hash("hi\n") {
		t.Fatalf("the write: %+v", c)
	}
	if m := byAction["modify"]; m == nil || m.Details["tool"] != "edit_file" || m.Details["size"] != "6" || m.Details["sha256"] != hash("hello\n") {
		t.Fatalf("the edit: %+v", m)
	}
	if k := byAction["kill"]; k == nil || k.Category != schemas.AuditProcess || k.Target != "sleep 30" || k.Reason != "timed out" ||
		!strings.HasPrefix(k.Details["signals"], "SIGINT") || k.Details["pid"] == "0" || k.Details["pid"] == "" {
		t.Fatalf("the kill: %+v", k)
	}
	if r := byAction["read"]; r == nil || r.Outcome != schemas.OutcomeDenied || r.Target != ".env" || !strings.Contains(r.Reason, "sensitive") {
		t.Fatalf("the sensitive read: %+v", r)
	}
	if w := byAction["write_file"]; w == nil || w.Category != schemas.AuditPermission || w.Outcome != schemas.OutcomeDenied ||
		w.Target != "../outside.txt" || !strings.Contains(w.Reason, "escapes the work directory") {
		t.Fatalf("the denied write: %+v", w)
	}

	// The projection: one line per call, completed by its result, and the
	// records beside them.
	last, err := f.Log.LastSeq(f.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Store.WaitFor(f.Ctx, last); err != nil {
		t.Fatal(err)
	}
	denied, err := f.Store.Audit(f.Ctx, projections.AuditQuery{Session: "S1", Outcome: schemas.OutcomeDenied})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range denied {
		got = append(got, e.Category+" "+e.Action+" "+e.Target)
	}
	if want := "file read .env, permission write_file ../outside.txt"; strings.Join(got, ", ") != want {
		t.Fatalf("denied entries %q, want %q", strings.Join(got, ", "), want)
	}
}
