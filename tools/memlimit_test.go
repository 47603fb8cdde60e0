//go:build unix

package tools

import (
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/goccy/go-yaml"
)

// awkDoubling makes awk double a string n times: 2^n bytes.
func awkDoubling(n int) []string {
	return []string{"awk", "BEGIN { s = \"x\"; for (i = 0; i < " + strconv.Itoa(n) + "; i++) s = s s; print length(s) }"}
}

func TestMemoryLimitStopsAnAllocationPastIt(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.MemoryLimit = 64 << 20 })

	// 1 MiB: well under the limit.
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": awkDoubling(20)})
	if !r.OK || strings.TrimSpace(r.Stdout) != "1048576" || strings.Contains(r.Summary, "memory") {
		t.Fatalf("an ordinary run under the limit: %+v", r)
	}

	// 1 GiB: far past it. The allocation fails and the result says why.
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": awkDoubling(30)})
	if r.OK {
		t.Fatalf("a 1 GiB allocation under a 64 MiB limit succeeded: %+v", r)
	}
	if !strings.Contains(r.Error, "exceeded the memory limit of 64.0 MiB per tool process") || !strings.Contains(r.Summary, "exceeded the memory limit") {
		t.Fatalf("error %q, summary %q: want the memory limit named", r.Error, r.Summary)
	}
}

func TestMemoryLimitIsTheChildsHardDataLimit(t *testing.T) {
	e := newTestExecutor(t, func(o *Options) { o.MemoryLimit = 48 << 20 })
	// Soft and hard: the tool cannot raise it, and its children inherit it.
	r := mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "ulimit -S -d; ulimit -H -d; sh -c 'ulimit -d'", "shell": true})
	if got := strings.Fields(r.Stdout); !r.OK || strings.Join(got, " ") != "49152 49152 49152" {
		t.Fatalf("ulimit -d in the tool: %q (%+v), want 49152 KiB three times", r.Stdout, r)
	}
	// argv[1:] reach the program unchanged through the shim.
	r = mustRun(t, e, "engineer", ToolExec, map[string]any{"argv": []string{"printf", "%s|", "a b", "", "$HOME", "\"q\""}})
	if r.Stdout != "a b||$HOME|\"q\"|" {
		t.Fatalf("arguments through the shim: %q", r.Stdout)
	}

	unlimited := newTestExecutor(t, func(o *Options) { o.MemoryLimit = -1 })
	r = mustRun(t, unlimited, "engineer", ToolExec, map[string]any{"command": "ulimit -d", "shell": true})
	var own syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &own); err != nil {
		t.Fatal(err)
	}
	want := "unlimited"
	if own.Cur != ^uint64(0) { // RLIM_INFINITY
		want = strconv.FormatUint(own.Cur>>10, 10)
	}
	if got := strings.TrimSpace(r.Stdout); got != want {
		t.Fatalf("unlimited: ulimit -d %q, want this process's own %q", got, want)
	}
}

func TestMemoryLimitDefaultAndText(t *testing.T) {
	o := (&Options{WorkDir: "."}).EnsureDefaults()
	if o.MemoryLimit != DefaultMemoryLimit() || DefaultMemoryLimit() < minMemoryLimit {
		t.Fatalf("default memory limit %v (DefaultMemoryLimit %v)", o.MemoryLimit, DefaultMemoryLimit())
	}
	if total := totalMemory(); total > 0 && uint64(DefaultMemoryLimit()) != total/2 {
		t.Fatalf("default %d, want half of %d", DefaultMemoryLimit(), total)
	}
	o.MemoryLimit = 2 << 30
	if got := o.MemoryLimitText(); !strings.HasPrefix(got, "2.0 GiB per process (rlimit RLIMIT_DATA") {
		t.Fatalf("MemoryLimitText %q", got)
	}
	o.MemoryLimit = -1
	if got := o.MemoryLimitText(); got != "unlimited" {
		t.Fatalf("MemoryLimitText %q", got)
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"1048576": 1 << 20, "512MiB": 512 << 20, "4GiB": 4 << 30, "2G": 2 << 30, "1.5 gib": 3 << 29,
		"64k": 64 << 10, "100b": 100, "unlimited": -1, " 1TiB ": 1 << 40,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1GiB", "4 GB", "lots", "1e30"} {
		if _, err := ParseByteSize(in); err == nil || !strings.Contains(err.Error(), "512MiB") {
			t.Errorf("ParseByteSize(%q): err %v, want a refusal that shows the form", in, err)
		}
	}
	var s struct {
		L ByteSize `json:"l"`
	}
	if err := json.Unmarshal([]byte(`{"l":"3MiB"}`), &s); err != nil || s.L != 3<<20 {
		t.Fatalf("JSON string: %v %v", s.L, err)
	}
	if err := json.Unmarshal([]byte(`{"l":4096}`), &s); err != nil || s.L != 4096 {
		t.Fatalf("JSON number: %v %v", s.L, err)
	}
	var y struct {
		L ByteSize `yaml:"l"`
	}
	if err := yaml.Unmarshal([]byte("l: 2GiB"), &y); err != nil || y.L != 2<<30 {
		t.Fatalf("YAML string: %v %v", y.L, err)
	}
	if err := yaml.Unmarshal([]byte("l: 65536"), &y); err != nil || y.L != 65536 {
		t.Fatalf("YAML number: %v %v", y.L, err)
	}
	if err := yaml.Unmarshal([]byte("l: 4 GB"), &y); err == nil || !strings.Contains(err.Error(), "512MiB") {
		t.Fatalf("YAML bad size: %v", err)
	}
}

func TestMemoryOutcome(t *testing.T) {
	if got := memoryOutcome(1<<30, "", "Traceback...\nMemoryError\n"); !strings.Contains(got, "exceeded the memory limit of 1.0 GiB") {
		t.Errorf("MemoryError: %q", got)
	}
	if got := memoryOutcome(1<<30, "SIGSEGV", ""); !strings.Contains(got, "may have exceeded the memory limit of 1.0 GiB") {
		t.Errorf("SIGSEGV: %q", got)
	}
	if got := memoryOutcome(1<<30, "SIGTERM", "error: no such file"); got != "" {
		t.Errorf("an unrelated failure blamed on memory: %q", got)
	}
}

// A running server changes the limit through the pool its executors share:
// the next process starts under the new one, and unset goes back to the
// executor's own.
func TestPoolMemoryLimitIsLive(t *testing.T) {
	pool, err := NewPool(2, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := newTestExecutor(t, func(o *Options) { o.MemoryLimit, o.Pool = 48<<20, pool })
	ulimit := func() string {
		t.Helper()
		r := mustRun(t, e, "engineer", ToolExec, map[string]any{"command": "ulimit -H -d", "shell": true})
		if !r.OK {
			t.Fatalf("ulimit -d: %+v", r)
		}
		return strings.TrimSpace(r.Stdout)
	}
	for _, step := range []struct {
		set  ByteSize
		want string // KiB
	}{{0, "49152"}, {96 << 20, "98304"}, {32 << 20, "32768"}, {0, "49152"}} {
		if err := pool.SetMemoryLimit(step.set); err != nil {
			t.Fatal(err)
		}
		if got := ulimit(); got != step.want {
			t.Fatalf("pool limit %v: ulimit -d %s KiB, want %s", step.set, got, step.want)
		}
	}
	if err := pool.SetMemoryLimit(1024); err == nil || !strings.Contains(err.Error(), "memory_limit 1024 is below 16.0 MiB") {
		t.Fatalf("SetMemoryLimit(1 KiB) = %v, want refused", err)
	}
}
