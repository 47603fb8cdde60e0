package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A flood of lines is truncated in the Result but reaches the observer
// whole: every line, in order, on the right stream, redacted, including a
// last line with no newline.
func TestRunObservedSeesEveryLineBeforeTruncation(t *testing.T) {
	e := newTestExecutor(t, nil)
	const n = 5000
	script := fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "line $i"; i=$((i+1)); done
echo "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789"
echo "to stderr" >&2
printf "last without newline"`, n)
	args, _ := json.Marshal(map[string]any{"command": script, "shell": true})
	var stdout, stderr []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.RunObserved(ctx, "engineer", Call{ID: CallID(t.Name()), Tool: ToolExec, Args: args}, func(stream, line string) {
		switch stream {
		case StreamStdout:
			stdout = append(stdout, line)
		case StreamStderr:
			stderr = append(stderr, line)
		default:
			t.Errorf("unknown stream %q", stream)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || !res.Truncated {
		t.Fatalf("want an OK, truncated result: ok=%v truncated=%v %s", res.OK, res.Truncated, res.Summary)
	}
	if kept := strings.Count(res.Stdout, "\nline "); kept >= n/2 {
		t.Fatalf("the result kept %d of %d lines: not truncated enough to prove anything", kept, n)
	}
	if len(stdout) != n+2 {
		t.Fatalf("observer saw %d stdout lines, want %d", len(stdout), n+2)
	}
	for i := range n {
		if want := fmt.Sprintf("line %d", i+1); stdout[i] != want {
			t.Fatalf("stdout line %d = %q, want %q", i+1, stdout[i], want)
		}
	}
	if got := stdout[n]; strings.Contains(got, "ghp_") || !strings.Contains(got, "[REDACTED]") {
		t.Fatalf("secret line not redacted for the observer: %q", got)
	}
	if got := stdout[n+1]; got != "last without newline" {
		t.Fatalf("last line = %q", got)
	}
	if len(stderr) != 1 || stderr[0] != "to stderr" {
		t.Fatalf("stderr lines = %q", stderr)
	}
}

// A line longer than MaxObservedLine is cut; the lines after it are intact.
func TestRunObservedBoundsLongLines(t *testing.T) {
	e := newTestExecutor(t, nil)
	script := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' 'x'; echo; echo after`, 3*MaxObservedLine)
	args, _ := json.Marshal(map[string]any{"command": script, "shell": true})
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.RunObserved(ctx, "engineer", Call{ID: CallID(t.Name()), Tool: ToolExec, Args: args}, func(_, line string) {
		lines = append(lines, line)
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || len(lines[0]) != MaxObservedLine || lines[1] != "after" {
		t.Fatalf("got %d lines (first %d bytes, last %q), want the long line cut to %d bytes then %q",
			len(lines), len(lines[0]), lines[len(lines)-1], MaxObservedLine, "after")
	}
}

// Run without an observer and the file tools never call it.
func TestRunObservedFileToolsDoNotCall(t *testing.T) {
	e := newTestExecutor(t, nil)
	writeFile(t, e.WorkDir()+"/a.txt", "one\ntwo\n")
	args, _ := json.Marshal(map[string]any{"path": "a.txt"})
	called := false
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := e.RunObserved(ctx, "engineer", Call{ID: CallID(t.Name()), Tool: ToolReadFile, Args: args}, func(_, _ string) { called = true })
	if err != nil || !res.OK {
		t.Fatalf("read_file: %v %+v", err, res)
	}
	if called {
		t.Fatal("the observer was called for a file tool")
	}
}
