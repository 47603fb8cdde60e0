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
	s := &Store{opts: Options{GCPercent: 300, HeapBytes: 1 << 30}}
	end1 := s.tuneGC()
	g, l := gcSettings()
	if g != 300 || l < 1<<30 || l == math.MaxInt64 {
		t.Fatalf("during a rebuild: GOGC %d, limit %d; want 300 and the live heap plus 1 GiB", g, l)
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
