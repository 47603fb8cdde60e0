package projections

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// gcSettings reads the collector's GOGC and memory limit without changing
// them.
func gcSettings() (gogc, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// A rebuild's collector settings hold while it runs, overlapping rebuilds
// share them, and the last one to end puts back what was there before; a
// limit set by GOMEMLIMIT is kept.
func TestRebuildTunesTheCollectorAndPutsItBack(t *testing.T) {
	gogc, limit := gcSettings()
	if limit != math.MaxInt64 {
		t.Fatalf("the test process runs with a memory limit (%d): unset GOMEMLIMIT", limit)
	}
	s := &Store{opts: Options{GCPercent: 300, MemoryBytes: 1 << 30}}
	end1 := s.tuneGC()
	g, l := gcSettings()
	if g != 300 || l < 1<<30-rebuildProgramBytes || l == math.MaxInt64 {
		t.Fatalf("during a rebuild: GOGC %d, limit %d; want 300 and 1 GiB less the program's share", g, l)
	}
	end2 := s.tuneGC()
	end1()
	if g2, l2 := gcSettings(); g2 != 300 || l2 != l {
		t.Fatalf("with a rebuild still running: GOGC %d, limit %d; want 300, %d", g2, l2, l)
	}
	end2()
	if g, l := gcSettings(); g != gogc || l != limit {
		t.Fatalf("after the rebuilds: GOGC %d, limit %d; want %d, %d back", g, l, gogc, limit)
	}

	// A limit the user set (GOMEMLIMIT) stays.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(3 << 30))
	end := s.tuneGC()
	if g, l := gcSettings(); g != 300 || l != 3<<30 {
		t.Fatalf("with GOMEMLIMIT set: GOGC %d, limit %d; want 300 and the user's 3 GiB", g, l)
	}
	end()

	// A store with no settings changes nothing.
	end = (&Store{}).tuneGC()
	if g, _ := gcSettings(); g != gogc {
		t.Fatalf("a store without GCPercent changed GOGC to %d", g)
	}
	end()
}

// A default rebuild's Go heap limit leaves room in its memory budget for
// what Pebble holds outside the Go heap, and the budget keeps its resident
// set under 1 GB; a live heap at the start above what the budget leaves
// (an embedded server holding a large duplicate window) raises the limit
// above it instead of letting the collector run without end.
func TestRebuildHeapLimit(t *testing.T) {
	o := Options{Dir: "d"}.ForRebuild()
	if err := o.EnsureDefaults().Validate(); err != nil {
		t.Fatalf("a rebuild's options: %v", err)
	}
	outside := 2*int64(o.MemTableBytes) + o.BlockCacheBytes + rebuildProgramBytes
	if l := rebuildHeapLimit(o, 100<<20); l+outside != o.MemoryBytes || o.MemoryBytes >= 1e9 {
		t.Fatalf("limit %d with %d outside the heap: want the budget %d, under 1 GB", l, outside, o.MemoryBytes)
	}
	if l := rebuildHeapLimit(o, 800<<20); l != 800<<20+rebuildMinHeadroom {
		t.Fatalf("limit %d with 800 MiB live at the start: want %d above it", l, rebuildMinHeadroom)
	}
}
