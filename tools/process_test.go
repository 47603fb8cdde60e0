//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/broker/brokertest"
)

// A child shell that traps SIGINT and SIGTERM spawns a grandchild that traps
// them too and carries on: cancellation must signal the whole group, kill
// both within the grace periods, and keep the output written so far.
func TestCancelKillsGrandchildTrappingSignals(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newTestExecutor(t, nil)
	dir := e.WorkDir()
	// The child traps both signals; being busy with its foreground job, it
	// would run the handlers only after the grandchild ends. The grandchild
	// traps both too and carries on. (A background job would have SIGINT
	// ignored by the shell, and ignored signals cannot be trapped.)
	writeFile(t, filepath.Join(dir, "stubborn.sh"), `trap 'echo child got INT' INT
trap 'echo child got TERM' TERM
echo $$ > child.pid
echo started
sh -c 'trap "echo grandchild got INT" INT; trap "echo grandchild got TERM" TERM; echo $$ > grandchild.pid; while :; do sleep 0.02; done'
echo child went on
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := e.Run(ctx, "engineer", Call{ID: "c1", Tool: ToolExec, Args: json.RawMessage(`{"argv":["sh","stubborn.sh"]}`)})
		done <- outcome{r, err}
	}()
	brokertest.Eventually(t, 10*time.Second, "both pid files", func() bool {
		return fileHasPid(filepath.Join(dir, "child.pid")) && fileHasPid(filepath.Join(dir, "grandchild.pid"))
	})
	child, grandchild := readPid(t, filepath.Join(dir, "child.pid")), readPid(t, filepath.Join(dir, "grandchild.pid"))
	if pidGone(child) || pidGone(grandchild) {
		t.Fatal("processes died before the cancel")
	}

	start := time.Now()
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	took := time.Since(start)

	// Both ignore SIGINT and SIGTERM: only SIGKILL, after both graces, ends them.
	if took < testINTGrace+testTERMGrace {
		t.Errorf("Run returned after %v, before the grace periods (%v) ran out", took, testINTGrace+testTERMGrace)
	}
	if limit := testINTGrace + testTERMGrace + testKillWait; took > limit {
		t.Errorf("Run returned after %v, want within %v", took, limit)
	}
	if !errors.Is(o.err, context.Canceled) || IsRefusal(o.err) {
		t.Errorf("err = %v, want one wrapping context.Canceled and not a refusal", o.err)
	}
	r := o.r
	if want := []string{"SIGINT", "SIGTERM", "SIGKILL"}; !slices.Equal(r.KillSignals, want) {
		t.Errorf("KillSignals = %v, want %v", r.KillSignals, want)
	}
	if !r.Canceled || !r.Partial || r.OK || r.TimedOut {
		t.Errorf("Canceled=%v Partial=%v OK=%v TimedOut=%v, want canceled partial failure", r.Canceled, r.Partial, r.OK, r.TimedOut)
	}
	if r.Signal != "SIGKILL" {
		t.Errorf("Signal = %q, want SIGKILL", r.Signal)
	}
	for _, want := range []string{"started", "grandchild got INT", "grandchild got TERM"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout lacks %q: %q", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "child went on") {
		t.Errorf("the grandchild ended before SIGKILL: %q", r.Stdout)
	}
	// Run returns only when the group is gone: no waiting needed.
	for name, pid := range map[string]int{"child": child, "grandchild": grandchild} {
		if !pidGone(pid) {
			t.Errorf("%s %d is still alive after Run returned", name, pid)
		}
	}
}

// The main process dies of SIGINT, but a grandchild that ignores SIGINT and
// SIGTERM and no longer holds the output pipes lives on in the group: the
// kill sequence goes on until the group is empty.
func TestKillSequenceOutlivesTheLeader(t *testing.T) {
	e := newTestExecutor(t, nil)
	dir := e.WorkDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := e.Run(ctx, "engineer", Call{ID: "c2", Tool: ToolExec, Args: json.RawMessage(
			`{"command":"sh -c 'trap \"\" TERM; echo $$ > gc.pid; exec sleep 30' >/dev/null 2>&1 & echo started; wait","shell":true}`)})
		done <- outcome{r, err}
	}()
	brokertest.Eventually(t, 10*time.Second, "the grandchild pid file", func() bool { return fileHasPid(filepath.Join(dir, "gc.pid")) })
	gc := readPid(t, filepath.Join(dir, "gc.pid"))
	start := time.Now()
	cancel()
	o := <-done
	if took := time.Since(start); took < testINTGrace+testTERMGrace {
		t.Errorf("returned after %v, before the group was empty", took)
	}
	if o.r.Signal != "SIGINT" || !slices.Equal(o.r.KillSignals, []string{"SIGINT", "SIGTERM", "SIGKILL"}) {
		t.Errorf("Signal=%q KillSignals=%v, want the leader dead of SIGINT and the sequence run to SIGKILL", o.r.Signal, o.r.KillSignals)
	}
	if !pidGone(gc) {
		t.Errorf("grandchild %d alive after Run returned", gc)
	}
}

// A command that never exits and writes nothing is stopped by its base
// timeout; a plain program dies of the first signal.
func TestTimeoutStopsSilentCommand(t *testing.T) {
	e := newTestExecutor(t, nil)
	start := time.Now()
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"sleep", "30"}, "timeout": 0.2})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
	if !r.TimedOut || !r.Partial || r.OK || r.Canceled {
		t.Fatalf("TimedOut=%v Partial=%v OK=%v Canceled=%v: %+v", r.TimedOut, r.Partial, r.OK, r.Canceled, r)
	}
	if !slices.Equal(r.KillSignals, []string{"SIGINT"}) || r.Signal != "SIGINT" || r.ExitCode != -1 {
		t.Fatalf("KillSignals=%v Signal=%q ExitCode=%d, want [SIGINT] SIGINT -1", r.KillSignals, r.Signal, r.ExitCode)
	}
	if !strings.Contains(r.Error, "timed out") {
		t.Fatalf("Error %q does not say it timed out", r.Error)
	}
}

// A timed-out command that ignores SIGINT and SIGTERM gets SIGKILL.
func TestTimeoutEscalatesToSIGKILL(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.Timeouts.ExtendOnOutput = 50 * time.Millisecond })
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `trap '' INT TERM; echo $$ > me.pid; echo waiting; while :; do sleep 0.02; done`, "shell": true, "timeout": 0.2,
	})
	if !r.TimedOut || r.Signal != "SIGKILL" || !slices.Equal(r.KillSignals, []string{"SIGINT", "SIGTERM", "SIGKILL"}) {
		t.Fatalf("TimedOut=%v Signal=%q KillSignals=%v", r.TimedOut, r.Signal, r.KillSignals)
	}
	if pid := readPid(t, filepath.Join(e.WorkDir(), "me.pid")); !pidGone(pid) {
		t.Fatalf("shell %d alive after Run returned", pid)
	}
	if !strings.Contains(r.Stdout, "waiting") {
		t.Fatalf("partial output lost: %q", r.Stdout)
	}
}

func adaptiveExecutor(t *testing.T, hard time.Duration) *Executor {
	return newTestExecutor(t, func(o *Options) {
		o.Timeouts = TimeoutOptions{
			Default:        200 * time.Millisecond,
			PerCommand:     map[string]time.Duration{},
			ExtendOnOutput: time.Second,
			Max:            hard,
		}
	})
}

// Meaningful output extends the base timeout.
func TestAdaptiveTimeoutExtendedByOutput(t *testing.T) {
	e := adaptiveExecutor(t, time.Minute)
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `i=0; while [ $i -lt 12 ]; do echo "compiling package $i"; sleep 0.05; i=$((i+1)); done`, "shell": true,
	})
	if !r.OK || r.TimedOut {
		t.Fatalf("a command writing meaningful lines for 600ms was stopped by a 200ms base timeout: %+v", r)
	}
	if r.StdoutLines != 12 {
		t.Fatalf("StdoutLines = %d, want 12", r.StdoutLines)
	}
}

// Noise (dots, spinners, bare percentages) does not extend it.
func TestAdaptiveTimeoutIgnoresNoise(t *testing.T) {
	e := adaptiveExecutor(t, time.Minute)
	for _, noise := range []string{".", "|", "42%", "[=====>     ] 55%"} {
		t.Run(noise, func(t *testing.T) {
			start := time.Now()
			r := mustRun(t, e, "engineer", ToolExec, map[string]any{
				"argv": []string{"sh", "-c", `i=0; while [ $i -lt 100 ]; do echo "$1"; sleep 0.05; i=$((i+1)); done`, "sh", noise},
			})
			if !r.TimedOut {
				t.Fatalf("noise %q extended the timeout: %+v", noise, r)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Fatalf("noise kept it alive for %v", took)
			}
		})
	}
	// A progress display that redraws one line with carriage returns.
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `i=0; while [ $i -lt 100 ]; do printf '\r%d%%' $i; sleep 0.05; i=$((i+1)); done`, "shell": true,
	})
	if !r.TimedOut {
		t.Fatalf("carriage-return progress extended the timeout: %+v", r)
	}
}

// Nothing runs past the hard cap, however meaningful its output.
func TestAdaptiveTimeoutHardCap(t *testing.T) {
	e := adaptiveExecutor(t, 600*time.Millisecond)
	start := time.Now()
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `i=0; while :; do echo "step $i done"; sleep 0.02; i=$((i+1)); done`, "shell": true,
	})
	took := time.Since(start)
	if !r.TimedOut {
		t.Fatalf("not timed out: %+v", r)
	}
	if took < 600*time.Millisecond || took > 600*time.Millisecond+testINTGrace+testTERMGrace+testKillWait {
		t.Fatalf("stopped after %v, want just after the 600ms cap", took)
	}
}

// Background processes left in the group when the command exits are killed,
// and Run does not wait for them.
func TestOrphansKilledAfterNormalExit(t *testing.T) {
	e := newTestExecutor(t, nil)
	start := time.Now()
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `sleep 30 & echo $! > bg.pid; echo done`, "shell": true,
	})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Run waited %v for a background process", took)
	}
	if !r.OK || r.Stdout != "done\n" {
		t.Fatalf("OK=%v Stdout=%q", r.OK, r.Stdout)
	}
	if !strings.Contains(r.Summary, "background processes") {
		t.Errorf("summary does not mention the killed background process: %q", r.Summary)
	}
	if pid := readPid(t, filepath.Join(e.WorkDir(), "bg.pid")); !pidGone(pid) {
		t.Fatalf("background sleep %d still alive", pid)
	}
}

func TestCommandNotFound(t *testing.T) {
	e := newTestExecutor(t, nil)
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"no-such-program-sylk"}})
	if r.OK || r.ExitCode != 127 || !strings.Contains(r.Error, "command not found") {
		t.Fatalf("OK=%v ExitCode=%d Error=%q", r.OK, r.ExitCode, r.Error)
	}
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "no-such-program-sylk", "shell": true})
	if r.OK || r.ExitCode != 127 {
		t.Fatalf("shell: OK=%v ExitCode=%d", r.OK, r.ExitCode)
	}
	writeFile(t, filepath.Join(e.WorkDir(), "notexec.sh"), "echo hi\n")
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"./notexec.sh"}})
	if r.OK || r.ExitCode != 126 {
		t.Fatalf("non-executable: OK=%v ExitCode=%d Error=%q", r.OK, r.ExitCode, r.Error)
	}
}

func TestExitCodeStdinDirEnv(t *testing.T) {
	e := newTestExecutor(t, nil)
	writeFile(t, filepath.Join(e.WorkDir(), "sub", "f.txt"), "x")
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{
		"command": `cat; pwd; echo "$GREETING"; ls; echo oops >&2; exit 3`, "shell": true,
		"stdin": "from stdin\n", "dir": "sub", "env": map[string]string{"GREETING": "hello"},
	})
	want := "from stdin\n" + filepath.Join(e.WorkDir(), "sub") + "\nhello\nf.txt\n"
	if r.OK || r.ExitCode != 3 || r.Stdout != want || r.Stderr != "oops\n" {
		t.Fatalf("OK=%v ExitCode=%d\nStdout=%q want %q\nStderr=%q", r.OK, r.ExitCode, r.Stdout, want, r.Stderr)
	}
	if r.StdoutBytes != int64(len(want)) || r.StderrBytes != 5 || r.Truncated {
		t.Fatalf("bytes %d/%d truncated %v", r.StdoutBytes, r.StderrBytes, r.Truncated)
	}
	// A child that never reads a large stdin does not hang the call.
	big := strings.Repeat("x", 1<<20)
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"true"}, "stdin": big})
	if !r.OK {
		t.Fatalf("true with unread stdin: %+v", r)
	}
	// Without stdin, a reader sees end of file at once.
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"cat"}})
	if !r.OK || r.Stdout != "" {
		t.Fatalf("cat without stdin: %+v", r)
	}
}

// An output flood is counted in full but kept within the memory bound.
func TestOutputFloodStaysBounded(t *testing.T) {
	const maxBytes = 64 << 10
	e := newTestExecutor(t, func(o *Options) { o.Output.MaxBytes = maxBytes })
	for _, tc := range []struct {
		name, cmd string
		bytes     int64
	}{
		{"no newlines", "head -c 100000000 /dev/zero", 100000000},
		{"short lines", "yes 'line of output' | head -c 20000000", 20000000},
		{"errors in the middle", `yes filler | head -n 100000; echo "main.go:12:3: undefined: frobnicate"; yes filler | head -n 100000`, 100000*7*2 + 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRun(t, e, "engineer", ToolExec, map[string]any{"command": tc.cmd, "shell": true})
			if !r.OK || r.StdoutBytes != tc.bytes || !r.Truncated {
				t.Fatalf("OK=%v StdoutBytes=%d (want %d) Truncated=%v", r.OK, r.StdoutBytes, tc.bytes, r.Truncated)
			}
			if len(r.Stdout) > maxBytes+16<<10 {
				t.Fatalf("kept %d bytes of output, bound %d", len(r.Stdout), maxBytes)
			}
			if !strings.Contains(r.Stdout, "omitted") && !strings.Contains(r.Stdout, "cut from this line") && !strings.Contains(r.Stdout, "binary data") {
				t.Fatalf("truncated output does not say what was cut: %q", r.Stdout[:200])
			}
			if tc.name == "errors in the middle" && !strings.Contains(r.Stdout, "main.go:12:3: undefined: frobnicate") {
				t.Fatal("the error line in the middle of the flood was dropped")
			}
		})
	}
}

// Many calls at once: each result is its own.
func TestConcurrentRuns(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.MaxConcurrent = 3 })
	const n = 12
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			want := strings.Repeat("x", i+1)
			r, err := e.Run(context.Background(), "engineer", Call{ID: CallID("conc", want), Tool: ToolExec,
				Args: json.RawMessage(`{"argv":["echo","` + want + `"]}`)})
			switch {
			case err != nil:
				errs <- err
			case r.Stdout != want+"\n":
				errs <- errors.New("got " + r.Stdout + " want " + want)
			default:
				errs <- nil
			}
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A call waiting for a slot gives up with its context.
func TestSlotWaitHonoursContext(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.MaxConcurrent = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	busy := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, "engineer", Call{ID: "busy", Tool: ToolExec, Args: json.RawMessage(`{"argv":["sleep","30"]}`)})
		busy <- err
	}()
	brokertest.Eventually(t, 5*time.Second, "the slot to be taken", func() bool { return e.pool.Usage().Other == 1 })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	r, err := e.Run(ctx2, "engineer", Call{ID: "waiting", Tool: ToolExec, Args: json.RawMessage(`{"argv":["true"]}`)})
	if !errors.Is(err, context.DeadlineExceeded) || !r.Canceled {
		t.Fatalf("waiting call: err=%v Canceled=%v", err, r.Canceled)
	}
	cancel()
	if err := <-busy; !errors.Is(err, context.Canceled) {
		t.Fatalf("busy call: %v", err)
	}
}
