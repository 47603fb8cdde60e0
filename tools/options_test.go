package tools

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o := (&Options{WorkDir: "."}).EnsureDefaults()
	if o.Kill.SIGINTGrace != 5*time.Second || o.Kill.SIGTERMGrace != 3*time.Second {
		t.Errorf("kill graces %v/%v, want the seed's 5s/3s", o.Kill.SIGINTGrace, o.Kill.SIGTERMGrace)
	}
	if o.Timeouts.Default != time.Minute || o.Timeouts.ExtendOnOutput != 30*time.Second || o.Timeouts.Max != 30*time.Minute {
		t.Errorf("timeouts %+v", o.Timeouts)
	}
	if o.Output.MaxBytes != 1<<20 || o.Output.HeadLines != 50 || o.Output.TailLines != 100 {
		t.Errorf("output %+v", o.Output)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := baseTimeout(o.Timeouts, []string{"/usr/local/go/bin/go", "test", "./..."}, 0); got != 5*time.Minute {
		t.Errorf("go test base timeout %v", got)
	}
	if got := baseTimeout(o.Timeouts, []string{"go", "build"}, 0); got != 10*time.Minute {
		t.Errorf("go build base timeout %v", got)
	}
	if got := baseTimeout(o.Timeouts, []string{"git", "status"}, 0); got != 30*time.Second {
		t.Errorf("git base timeout %v", got)
	}
	if got := baseTimeout(o.Timeouts, []string{"ls"}, 0); got != time.Minute {
		t.Errorf("ls base timeout %v", got)
	}
	if got := baseTimeout(o.Timeouts, []string{"go", "test"}, 7*time.Second); got != 7*time.Second {
		t.Errorf("explicit timeout %v", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Options){
		"no work dir":          func(o *Options) { o.WorkDir = "" },
		"negative grace":       func(o *Options) { o.Kill.SIGINTGrace = -1 },
		"default over max":     func(o *Options) { o.Timeouts.Default = time.Hour },
		"per command over max": func(o *Options) { o.Timeouts.PerCommand = map[string]time.Duration{"x": time.Hour} },
		"tiny output":          func(o *Options) { o.Output.MaxBytes = 1000 },
		"bad pattern":          func(o *Options) { o.Output.ImportantPatterns = []string{"("} },
		"bad noise":            func(o *Options) { o.Timeouts.NoisePatterns = []string{"["} },
		"bad block glob":       func(o *Options) { o.Env.Block = []string{"["} },
		"short secret":         func(o *Options) { o.Secrets.Values = []string{"abc"} },
		"policy typo": func(o *Options) {
			o.Permissions = Policy{Agents: map[string]AgentPolicy{"x": {Tools: []string{"exce"}}}}
		},
		"negative concurrency": func(o *Options) { o.MaxConcurrent = -1 },
		"tiny memory limit":    func(o *Options) { o.MemoryLimit = 1 << 20 },
		"memory limit -2":      func(o *Options) { o.MemoryLimit = -2 },
	} {
		o := Options{WorkDir: "."}
		mutate(&o)
		o.EnsureDefaults()
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: Validate = %v, want ErrInvalidOptions", name, err)
		}
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{f, filepath.Join(t.TempDir(), "missing")} {
		if _, err := NewExecutor(Options{WorkDir: dir}); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("work dir %s: %v", dir, err)
		}
	}
}

func TestCallID(t *testing.T) {
	a := CallID("evt-1", "0")
	if a != CallID("evt-1", "0") {
		t.Fatal("not deterministic")
	}
	if !validID(a) || len(a) != 32 {
		t.Fatalf("id %q", a)
	}
	for _, other := range []string{CallID("evt-1", "1"), CallID("evt-10"), CallID("evt-", "10"), CallID("evt-1"), CallID()} {
		if other == a {
			t.Fatalf("collision: %q", other)
		}
	}
	if CallID("ab", "c") == CallID("a", "bc") {
		t.Fatal("parts are not separated")
	}
}
