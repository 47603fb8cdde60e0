//go:build unix

package tools

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A program gets its stdin, and its stdout comes back verbatim.
func TestRunProgramStdinAndRawStdout(t *testing.T) {
	e := newTestExecutor(t, nil)
	r, err := e.RunProgram(context.Background(), Program{Argv: []string{"cat"}, Stdin: []byte(`{"a": 1}`), Timeout: 5 * time.Second})
	if err != nil || !r.OK || string(r.Raw) != `{"a": 1}` || r.RawCut {
		t.Fatalf("result %+v raw %q err %v", r.Result, r.Raw, err)
	}
	r, _ = e.RunProgram(context.Background(), Program{Argv: []string{"sh", "-c", "printf 0123456789"}, MaxStdout: 4})
	if string(r.Raw) != "0123" || !r.RawCut {
		t.Fatalf("raw %q cut %v, want the first 4 bytes and cut", r.Raw, r.RawCut)
	}
}

// Output does not extend a program's timeout: a program that keeps
// printing meaningful lines is stopped at it.
func TestRunProgramTimeoutIsHard(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) {
		o.Kill = KillOptions{SIGINTGrace: 100 * time.Millisecond, SIGTERMGrace: 100 * time.Millisecond}
	})
	writeFile(t, filepath.Join(e.WorkDir(), "chatty.sh"), "while :; do echo error: still working; sleep 0.05; done\n")
	start := time.Now()
	r, err := e.RunProgram(context.Background(), Program{Argv: []string{"sh", "chatty.sh"}, Timeout: 300 * time.Millisecond})
	if err != nil || r.OK || !r.TimedOut {
		t.Fatalf("result %+v err %v, want a timeout", r.Result, err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("stopped after %s, the timeout was 300ms", took)
	}
}

// Bad programs are refused with the reason.
func TestRunProgramRefusals(t *testing.T) {
	e := newTestExecutor(t, nil)
	for _, p := range []Program{{}, {Argv: []string{"true"}, Env: map[string]string{"GITHUB_TOKEN": "x"}}, {Argv: []string{"true"}, Timeout: -1}} {
		if _, err := e.RunProgram(context.Background(), p); !errors.Is(err, ErrInvalidArgs) && !errors.Is(err, ErrPermissionDenied) {
			t.Errorf("%+v: err %v, want a refusal", p, err)
		}
	}
	r, err := e.RunProgram(context.Background(), Program{Argv: []string{"./missing-hook"}})
	if err != nil || r.OK || !strings.Contains(r.Error, "missing-hook") {
		t.Fatalf("missing program: %+v %v", r.Result, err)
	}
}
