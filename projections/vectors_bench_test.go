package projections

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/sylk/sylk/projections/ann"
)

// BenchmarkVectorScan is the vector side of a hybrid search at a large work
// directory's size: the exact scan of 20,000 unit vectors of 768
// dimensions for the 50 nearest.
func BenchmarkVectorScan(b *testing.B) {
	const n, dims = 20000, 768
	rng := rand.New(rand.NewSource(1))
	vecs := make(map[string][]float32, n)
	for i := range n {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		vecs[fmt.Sprintf("f%05d", i)] = ann.Unit(v)
	}
	q := vecs["f00042"]
	b.ResetTimer()
	for b.Loop() {
		if hits := scanNearest(vecs, q, 50, nil); hits[0].path != "f00042" {
			b.Fatalf("nearest to itself: %s", hits[0].path)
		}
	}
}
