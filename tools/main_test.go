package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Short kill-sequence graces keep the suite fast; the defaults stay 5s/3s.
const (
	testINTGrace  = 150 * time.Millisecond
	testTERMGrace = 150 * time.Millisecond
	testKillWait  = time.Second
)

// testOptions returns options rooted at a fresh directory with a hermetic
// environment: PATH from this process, HOME in the temp dir, git configured
// only through the environment.
func testOptions(t testing.TB) Options {
	t.Helper()
	dir := t.TempDir()
	home := t.TempDir()
	return Options{
		WorkDir:     dir,
		Permissions: DefaultPolicy(),
		Env: EnvOptions{
			Base: []string{
				"PATH=" + os.Getenv("PATH"),
				"HOME=" + home,
				"LANG=C",
				"GIT_CONFIG_NOSYSTEM=1",
				"GIT_CONFIG_GLOBAL=/dev/null",
				"GIT_AUTHOR_NAME=Sylk Test", "GIT_AUTHOR_EMAIL=test@sylk.invalid",
				"GIT_COMMITTER_NAME=Sylk Test", "GIT_COMMITTER_EMAIL=test@sylk.invalid",
			},
		},
		Kill: KillOptions{SIGINTGrace: testINTGrace, SIGTERMGrace: testTERMGrace, KillWait: testKillWait},
	}
}

func newTestExecutor(t testing.TB, mutate func(*Options)) *Executor {
	t.Helper()
	o := testOptions(t)
	if mutate != nil {
		mutate(&o)
	}
	e, err := NewExecutor(o)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	return e
}

// run calls tool with args (a Go value marshalled to JSON, or a string of
// raw JSON) as agent.
func run(t *testing.T, e *Executor, agent, tool string, args any) (Result, error) {
	t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.Run(ctx, agent, Call{ID: CallID(t.Name(), tool, raw), Tool: tool, Args: json.RawMessage(raw)})
}

// mustRun is run for calls that must not be refused.
func mustRun(t *testing.T, e *Executor, agent, tool string, args any) Result {
	t.Helper()
	r, err := run(t, e, agent, tool, args)
	if err != nil {
		t.Fatalf("%s %v: unexpected error: %v", tool, args, err)
	}
	return r
}

// pidGone reports whether pid is dead. A zombie is dead: it only waits for
// its parent to reap it, and orphans are reparented to PID 1, which in some
// containers never reaps.
func pidGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Fatalf("pid file %s: %q", path, b)
	}
	return pid
}

func fileHasPid(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.HasSuffix(string(b), "\n")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
