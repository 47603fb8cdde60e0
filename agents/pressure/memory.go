package pressure

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sylk/sylk/events"
)

// Where a memory reading comes from.
const (
	// MemoryCgroup: the memory.current of the nearest cgroup (v2) with a
	// memory.max, less its reclaimable page cache (inactive_file).
	MemoryCgroup = "cgroup"
	// MemoryMachine: /proc/meminfo, MemTotal less MemAvailable.
	MemoryMachine = "meminfo"
)

// Memory is a reading of the memory the server may use: Used of Limit bytes,
// Percent rounded down, and Level as for the stream's quota
// (schemas.QuotaWarn, schemas.QuotaCritical, or 0 under QuotaWarn).
type Memory struct {
	Source  string
	Used    uint64
	Limit   uint64
	Percent int
	Level   int
}

// ErrNoMemoryReading: neither a cgroup limit nor /proc/meminfo says how
// much memory there is.
var ErrNoMemoryReading = errors.New("no memory reading")

// ReadMemory reads the memory in use under root ("/" but in tests): against
// the limit of the process's cgroup (v2) when one is set, as that is what
// the kernel enforces first, otherwise against the machine's memory.
func ReadMemory(root string) (Memory, error) {
	m, err := readCgroup(root)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return m, err
	}
	return readMeminfo(root)
}

// cgroupMounts are where a cgroup v2 hierarchy is mounted: alone, or beside
// the v1 controllers (the hybrid layout).
var cgroupMounts = []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"}

// readCgroup reads the nearest cgroup, from the process's own up, that has
// a memory limit. No such cgroup is an error wrapping os.ErrNotExist.
func readCgroup(root string) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return Memory{}, err
	}
	var path string
	for line := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
			path = p
		}
	}
	if path == "" {
		return Memory{}, fmt.Errorf("no cgroup v2 in /proc/self/cgroup: %w", os.ErrNotExist)
	}
	for _, mount := range cgroupMounts {
		for dir := filepath.Clean("/" + path); ; dir = filepath.Dir(dir) {
			full := filepath.Join(root, mount, dir)
			limit, err := readLimit(filepath.Join(full, "memory.max"))
			if err == nil {
				return cgroupUse(full, limit)
			}
			if !errors.Is(err, os.ErrNotExist) {
				return Memory{}, err
			}
			if dir == "/" {
				break
			}
		}
	}
	return Memory{}, fmt.Errorf("no cgroup memory.max: %w", os.ErrNotExist)
}

// readLimit reads a memory.max; "max" (no limit) is os.ErrNotExist, so
// that the search goes on to the parent.
func readLimit(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, fmt.Errorf("%s: no limit: %w", path, os.ErrNotExist)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s: %q is not a memory limit", path, s)
	}
	return n, nil
}

func cgroupUse(dir string, limit uint64) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return Memory{}, err
	}
	used, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Memory{}, fmt.Errorf("%s/memory.current: %w", dir, err)
	}
	// Inactive page cache is given back before the limit bites: not in use.
	if stat, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		if cache, ok := statValue(stat, "inactive_file"); ok {
			used -= min(used, cache)
		}
	}
	return memoryOf(MemoryCgroup, used, limit), nil
}

// statValue is the value of key in a memory.stat ("key value" lines).
func statValue(stat []byte, key string) (uint64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// readMeminfo reads the machine's memory: MemTotal less MemAvailable (what
// the kernel could hand out without swapping).
func readMeminfo(root string) (Memory, error) {
	b, err := os.ReadFile(filepath.Join(root, "proc/meminfo"))
	if err != nil {
		return Memory{}, fmt.Errorf("%w: %w", ErrNoMemoryReading, err)
	}
	kb := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
			kb[k] = n
		}
	}
	total, ok1 := kb["MemTotal"]
	avail, ok2 := kb["MemAvailable"]
	if !ok1 || !ok2 || total == 0 {
		return Memory{}, fmt.Errorf("%w: /proc/meminfo has no MemTotal and MemAvailable", ErrNoMemoryReading)
	}
	return memoryOf(MemoryMachine, (total-min(total, avail))<<10, total<<10), nil
}

func memoryOf(source string, used, limit uint64) Memory {
	m := Memory{Source: source, Used: used, Limit: limit}
	m.Level, m.Percent = events.QuotaLevel(used, int64(limit))
	return m
}

// WatchMemory reads the memory every interval (read is ReadMemory("/") but
// in tests) and hands each reading to onReading; it returns when ctx ends.
// A failed reading is logged once, then retried quietly.
func WatchMemory(ctx context.Context, interval time.Duration, read func() (Memory, error), onReading func(Memory)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		m, err := read()
		switch {
		case err == nil:
			failing = false
			onReading(m)
		case !failing:
			failing = true
			slog.Warn("memory pressure: no reading", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
