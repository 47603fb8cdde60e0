package tools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A Result survives a JSON round trip unchanged, so a recorded result can be
// reused on redelivery as it was.
func TestResultRoundTrip(t *testing.T) {
	e := newTestExecutor(t, nil)
	writeFile(t, e.WorkDir()+"/f.txt", "x\ny\n")
	for _, r := range []Result{
		mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "echo out; echo err >&2; exit 2", "shell": true}),
		mustRun(t, e, "engineer", ToolReadFile, map[string]any{"path": "f.txt"}),
		mustRun(t, e, "engineer", ToolGrep, map[string]any{"pattern": "y"}),
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, back) {
			t.Errorf("round trip changed the result:\n%+v\n%+v", r, back)
		}
		for _, key := range []string{`"call_id"`, `"tool"`, `"ok"`, `"exit_code"`, `"duration_ms"`} {
			if !strings.Contains(string(b), key) {
				t.Errorf("JSON lacks %s: %s", key, b)
			}
		}
	}
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "echo out; echo err >&2; exit 2", "shell": true})
	text := r.Text()
	for _, want := range []string{"exit status 2", "--- stdout ---\nout\n", "--- stderr ---\nerr\n", "error: "} {
		if !strings.Contains(text, want) {
			t.Errorf("Text() lacks %q:\n%s", want, text)
		}
	}
}

// A tool that takes well under a millisecond still has its time recorded, in
// microseconds: a DAG benchmark that subtracts the tools' own time from the
// wall time would otherwise count it as the runtime's overhead.
func TestFastToolTimeIsRecorded(t *testing.T) {
	e := newTestExecutor(t, nil)
	writeFile(t, e.WorkDir()+"/f.txt", "x\n")
	r := mustRun(t, e, "engineer", ToolList, map[string]any{"path": "."})
	if r.DurationUS <= 0 {
		t.Fatalf("list took %d µs (%d ms): want its time in microseconds", r.DurationUS, r.DurationMS)
	}
	if r.DurationMS != r.DurationUS/1000 {
		t.Errorf("DurationMS %d, DurationUS %d: the two disagree", r.DurationMS, r.DurationUS)
	}
}
