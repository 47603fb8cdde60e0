package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testScript prints `go test -json` lines for passed, failed and skipped
// tests (with output lines between), records that it ran, and fails.
func testScript(passed, failed, skipped int) string {
	return fmt.Sprintf(`echo ran >> ran.txt
i=1; while [ $i -le %d ]; do
  echo '{"Action":"run","Package":"p","Test":"TestPass'$i'"}'
  echo '{"Action":"output","Package":"p","Test":"TestPass'$i'","Output":"=== RUN   TestPass'$i'\n"}'
  echo '{"Action":"pass","Package":"p","Test":"TestPass'$i'","Elapsed":0}'
  i=$((i+1)); done
i=1; while [ $i -le %d ]; do
  echo '{"Action":"run","Package":"p","Test":"TestFail'$i'"}'
  echo '{"Action":"fail","Package":"p","Test":"TestFail'$i'","Elapsed":0}'
  i=$((i+1)); done
i=1; while [ $i -le %d ]; do
  echo '{"Action":"skip","Package":"p","Test":"TestSkip'$i'","Elapsed":0}'
  i=$((i+1)); done
echo '{"Action":"fail","Package":"p","Elapsed":1}'
exit 1`, passed, failed, skipped)
}

func dispatch(t *testing.T, s *llmtest.Stack, dir, script string) *schemas.Envelope {
	t.Helper()
	env, err := schemas.New(schemas.TypeTaskDispatch, "S1", "orchestrator", "tester", time.Now(), schemas.TaskDispatch{
		DAGID: "d1", NodeID: "tests", Attempt: 1, Agent: "tester", Tool: tools.ToolExec,
		Args: map[string]any{"command": script, "shell": true}, WorkDir: dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Log.Append(s.Ctx, env); err != nil {
		t.Fatal(err)
	}
	return env
}

func tester(s *llmtest.Stack) *Worker {
	return &Worker{
		Agent:     "tester",
		Executors: &Executors{Options: tools.Options{Permissions: tools.DefaultPolicy()}},
		Records:   s.Store, Judge: ByTests, Prepare: GoTestJSON, Observe: CountTests,
	}
}

// The Tester's counts are exact over an output far longer than the result
// keeps: the observer saw every line, the result was truncated.
func TestTesterCountsEveryResultOfATruncatedOutput(t *testing.T) {
	s := llmtest.NewStack(t)
	dir := t.TempDir()
	s.Run("tester", tester(s))
	dispatch(t, s, dir, testScript(1200, 250, 50))
	brokertest.Eventually(t, 30*time.Second, "test_results appended", func() bool { return len(s.Events(schemas.TypeTestResults)) == 1 })

	checkExact(t, s, 1200, 250, 50)
	if ran, _ := os.ReadFile(filepath.Join(dir, "ran.txt")); strings.Count(string(ran), "ran") != 1 {
		t.Fatalf("the tool ran %d times", strings.Count(string(ran), "ran"))
	}
}

// A redelivery after a crash reuses the recorded result, and with it the
// counts the observer recorded: the tool does not run again and the counts
// stay exact although the reused output is truncated.
func TestTesterCountsSurviveRedelivery(t *testing.T) {
	s := llmtest.NewStack(t)
	dir := t.TempDir()
	w := tester(s)
	var deliveries atomic.Int32
	s.Run("tester", agents.HandlerFunc(func(ctx context.Context, d *agents.Delivery) ([]*schemas.Envelope, error) {
		outs, err := w.Handle(ctx, d)
		if deliveries.Add(1) == 1 && err == nil {
			return nil, agents.Transient(errors.New("crash before the outcome is appended"), time.Millisecond)
		}
		return outs, err
	}))
	dispatch(t, s, dir, testScript(700, 3, 400))
	brokertest.Eventually(t, 30*time.Second, "test_results appended after a redelivery", func() bool {
		return deliveries.Load() >= 2 && len(s.Events(schemas.TypeTestResults)) == 1
	})
	checkExact(t, s, 700, 3, 400)
	if ran, _ := os.ReadFile(filepath.Join(dir, "ran.txt")); strings.Count(string(ran), "ran") != 1 {
		t.Fatalf("the tool ran %d times across 2 deliveries, want 1", strings.Count(string(ran), "ran"))
	}
	if n := len(s.Events(schemas.TypeToolResult)); n != 1 {
		t.Fatalf("%d tool results recorded, want 1", n)
	}
}

func checkExact(t *testing.T, s *llmtest.Stack, passed, failed, skipped int) {
	t.Helper()
	res, err := schemas.PayloadAs[schemas.TestResults](s.Events(schemas.TypeTestResults)[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed != passed || res.Failed != failed || res.Skipped != skipped {
		t.Fatalf("test_results %d passed, %d failed, %d skipped; want %d, %d, %d", res.Passed, res.Failed, res.Skipped, passed, failed, skipped)
	}
	if len(res.FailedTests) != min(failed, MaxFailedNames) || res.FailedTests[0] != "p.TestFail1" {
		t.Fatalf("failed tests: %d names, first %q", len(res.FailedTests), res.FailedTests[0])
	}
	tr, err := schemas.PayloadAs[schemas.ToolResult](s.Events(schemas.TypeToolResult)[0])
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Truncated {
		t.Fatal("the recorded output was not truncated: the test proves nothing")
	}
	if parsed := ParseTestOutput(tr.Stdout); parsed.Passed == passed && parsed.Skipped == skipped {
		t.Fatalf("the truncated output alone gives the exact counts (%+v): the test proves nothing", parsed)
	}
	var data map[string]json.RawMessage
	if err := json.Unmarshal([]byte(tr.Data), &data); err != nil || data["test_counts"] == nil {
		t.Fatalf("recorded data %q has no test_counts", tr.Data)
	}
	failedEv, err := schemas.PayloadAs[schemas.TaskFailed](s.Events(schemas.TypeTaskFailed)[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d passed, %d failed, %d skipped", passed, failed, skipped); !strings.HasPrefix(failedEv.Error, want) {
		t.Fatalf("task_failed says %q, want it to start with %q", failedEv.Error, want)
	}
}
