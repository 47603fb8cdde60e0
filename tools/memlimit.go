package tools

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// fallbackMemoryLimit is the default per-process memory limit where the
// machine's memory cannot be read.
const fallbackMemoryLimit = 4 << 30

// minMemoryLimit is the smallest memory limit Validate accepts: below it
// the shell that applies the limit cannot start.
const minMemoryLimit = 16 << 20

// DefaultMemoryLimit is the per-process memory limit when none is
// configured: half of the machine's physical memory, so that one runaway
// tool fails on its own before the kernel's OOM killer picks a victim among
// the server and the user's programs, while an ordinary build or test run
// (a few GiB at most) keeps room. Where the memory size cannot be read it is
// 4 GiB.
func DefaultMemoryLimit() ByteSize {
	if total := totalMemory(); total > 0 {
		return ByteSize(total / 2)
	}
	return fallbackMemoryLimit
}

// CheckMemoryLimit reports a memory limit Validate refuses; 0 (the
// default) and -1 (unlimited) are accepted.
func CheckMemoryLimit(limit ByteSize) error {
	if limit != 0 && limit != -1 && limit < minMemoryLimit {
		return fmt.Errorf("memory_limit %d is below %s: give a size such as 2GiB, or unlimited", int64(limit), ByteSize(minMemoryLimit))
	}
	return nil
}

// liveMemoryLimit is the memory limit of a tool process started now: the
// pool's, when a running server changed it, else the options'.
func (o *Options) liveMemoryLimit() ByteSize {
	if o.Pool != nil {
		if l := o.Pool.memoryLimit(); l != 0 {
			return l
		}
	}
	return o.MemoryLimit
}

// ByteSize is a size in bytes. In configuration it is written as a number
// of bytes or with a unit: "512MiB", "4GiB", "2G" (K, M, G and T are powers
// of 1024 too); "unlimited" is -1.
type ByteSize int64

// String formats s with a binary unit ("4.0 GiB"), or "unlimited".
func (s ByteSize) String() string {
	if s < 0 {
		return "unlimited"
	}
	return sizeString(int64(s))
}

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"t", 1 << 40}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}, {"b", 1},
}

// ParseByteSize reads a size written as ByteSize documents.
func ParseByteSize(text string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "unlimited" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || n*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("size %q: write a number of bytes or a number with a unit (512MiB, 4GiB), or unlimited", text)
	}
	return ByteSize(n * float64(mult)), nil
}

// UnmarshalText reads a size from configuration (YAML and JSON strings).
func (s *ByteSize) UnmarshalText(b []byte) error {
	v, err := ParseByteSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalJSON reads a size given as a JSON number (bytes) or string.
func (s *ByteSize) UnmarshalJSON(b []byte) error {
	var text string
	if err := json.Unmarshal(b, &text); err != nil {
		text = string(b)
	}
	return s.UnmarshalText([]byte(text))
}

// memoryExhaustedMarks are what programs print when an allocation fails
// (lower case): C libraries and tools, Python, C++, Go, Node, the JVM.
var memoryExhaustedMarks = []string{
	"out of memory", "cannot allocate memory", "memoryerror", "bad_alloc",
	"memory exhausted", "failed to allocate", "allocation failed", "outofmemoryerror",
}

// memoryOutcome explains a failed process that ran under a memory limit of
// limit bytes: "" when nothing points at the limit. An allocation failure
// named in its output is certain; a crash by a signal that a failed
// allocation often ends in is only likely.
func memoryOutcome(limit int64, signal string, output ...string) string {
	for _, o := range output {
		lo := strings.ToLower(o)
		for _, m := range memoryExhaustedMarks {
			if strings.Contains(lo, m) {
				return fmt.Sprintf("exceeded the memory limit of %s per tool process (an allocation failed: %q in its output; raise tools.memory_limit if it needs more)", ByteSize(limit), m)
			}
		}
	}
	switch signal {
	case "SIGKILL", "SIGSEGV", "SIGABRT", "SIGBUS":
		return fmt.Sprintf("it may have exceeded the memory limit of %s per tool process (a failed allocation often ends in %s; raise tools.memory_limit if it needs more)", ByteSize(limit), signal)
	}
	return ""
}
