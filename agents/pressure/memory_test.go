package pressure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/schemas"
)

// writeTree writes files (path relative to a new root: content) and
// returns the root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const meminfo = "MemTotal:        1000 kB\nMemFree:           20 kB\nMemAvailable:      50 kB\nBuffers:            1 kB\n"

func TestReadMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Memory
		err   error
	}{
		{"the process's cgroup, its reclaimable cache not counted", map[string]string{
			"proc/self/cgroup":                          "0::/sylk.service\n",
			"sys/fs/cgroup/sylk.service/memory.max":     "1000\n",
			"sys/fs/cgroup/sylk.service/memory.current": "950\n",
			"sys/fs/cgroup/sylk.service/memory.stat":    "anon 700\nfile 250\ninactive_file 100\nactive_file 150\n",
			"proc/meminfo":                              meminfo,
		}, Memory{Source: MemoryCgroup, Used: 850, Limit: 1000, Percent: 85, Level: schemas.QuotaWarn}, nil},
		{"no limit of its own: the parent's", map[string]string{
			"proc/self/cgroup": "0::/system.slice/sylk.service\n",
			"sys/fs/cgroup/system.slice/sylk.service/memory.max":     "max\n",
			"sys/fs/cgroup/system.slice/sylk.service/memory.current": "10\n",
			"sys/fs/cgroup/system.slice/memory.max":                  "2000\n",
			"sys/fs/cgroup/system.slice/memory.current":              "1900\n",
			"proc/meminfo": meminfo,
		}, Memory{Source: MemoryCgroup, Used: 1900, Limit: 2000, Percent: 95, Level: schemas.QuotaCritical}, nil},
		{"the hybrid layout (v2 beside the v1 controllers)", map[string]string{
			"proc/self/cgroup":                         "4:memory:/x\n0::/box\n",
			"sys/fs/cgroup/unified/box/memory.max":     "4000\n",
			"sys/fs/cgroup/unified/box/memory.current": "1000\n",
		}, Memory{Source: MemoryCgroup, Used: 1000, Limit: 4000, Percent: 25}, nil},
		{"no cgroup limit anywhere: the machine's memory", map[string]string{
			"proc/self/cgroup":             "0::/\n",
			"sys/fs/cgroup/memory.current": "123\n",
			"proc/meminfo":                 meminfo,
		}, Memory{Source: MemoryMachine, Used: 950 << 10, Limit: 1000 << 10, Percent: 95, Level: schemas.QuotaCritical}, nil},
		{"cgroup v1 only: the machine's memory", map[string]string{
			"proc/self/cgroup": "4:memory:/x\n",
			"proc/meminfo":     meminfo,
		}, Memory{Source: MemoryMachine, Used: 950 << 10, Limit: 1000 << 10, Percent: 95, Level: schemas.QuotaCritical}, nil},
		{"a limit that is no number", map[string]string{
			"proc/self/cgroup":               "0::/a\n",
			"sys/fs/cgroup/a/memory.max":     "lots\n",
			"sys/fs/cgroup/a/memory.current": "1\n",
			"proc/meminfo":                   meminfo,
		}, Memory{}, errors.New(`is not a memory limit`)},
		{"a meminfo without MemAvailable", map[string]string{
			"proc/meminfo": "MemTotal: 1000 kB\n",
		}, Memory{}, ErrNoMemoryReading},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadMemory(writeTree(t, tc.files))
			switch {
			case tc.err == nil && err != nil:
				t.Fatal(err)
			case tc.err != nil && err == nil:
				t.Fatalf("read %+v, want an error %q", got, tc.err)
			case tc.err != nil && !errors.Is(err, tc.err) && !strings.Contains(err.Error(), tc.err.Error()):
				t.Fatalf("error %q, want %q", err, tc.err)
			case got != tc.want:
				t.Fatalf("read %+v, want %+v", got, tc.want)
			}
		})
	}
}

// This machine's memory reads, from its cgroup or its meminfo.
func TestReadMemoryHere(t *testing.T) {
	m, err := ReadMemory("/")
	if err != nil {
		t.Fatal(err)
	}
	if m.Limit == 0 || m.Used > m.Limit || m.Percent > 100 || (m.Source != MemoryCgroup && m.Source != MemoryMachine) {
		t.Fatalf("read %+v", m)
	}
}

// WatchMemory hands every reading on, goes on past a failed one, and
// returns when its context ends.
func TestWatchMemory(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	var got []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchMemory(ctx, time.Millisecond, func() (Memory, error) {
			reads++
			if reads == 2 {
				return Memory{}, ErrNoMemoryReading
			}
			return Memory{Percent: reads}, nil
		}, func(m Memory) {
			got = append(got, m.Percent)
			if len(got) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("WatchMemory did not return after its context ended")
	}
	if fmt.Sprint(got) != "[1 3 4]" {
		t.Fatalf("readings handed on %v, want [1 3 4] (the second failed)", got)
	}
}
