package ann

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// Generated vectors shaped like text embeddings: topics, each of a few
// subtopics, each of about PerCluster texts; a text's vector is its
// subtopic's plus noise of about its length, so texts of one subtopic are
// near (cosine about 0.4), of one topic less so, of different topics
// unrelated.
type Generated struct {
	IDs     []string
	Vecs    [][]float32
	Labels  []string
	Queries [][]float32
}

// Generation parameters.
const (
	genPerCluster  = 100 // texts per subtopic
	genSubtopics   = 10  // subtopics per topic
	genSubNoise    = 0.8 // a subtopic's distance from its topic
	genPointNoise  = 1.5 // a text's distance from its subtopic
	genLabelsCount = 4   // labels (domain/type) spread over the vectors
)

// Generate makes n unit vectors of dim dimensions and queries more drawn
// from the same subtopics (not among the n), deterministically from seed.
// Each vector has one of four labels ("d0".."d3").
func Generate(n, dim, queries int, seed uint64) *Generated {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	noise := func(v []float32, scale float64) []float32 {
		out := make([]float32, dim)
		f := scale / math.Sqrt(float64(dim))
		for i := range out {
			out[i] = v[i] + float32(rng.NormFloat64()*f)
		}
		return Unit(out)
	}
	zero := make([]float32, dim)
	subs := make([][]float32, max(1, n/genPerCluster))
	var topic []float32
	for i := range subs {
		if i%genSubtopics == 0 {
			topic = noise(zero, 1)
		}
		subs[i] = noise(topic, genSubNoise)
	}
	g := &Generated{IDs: make([]string, n), Vecs: make([][]float32, n), Labels: make([]string, n)}
	for i := range n {
		g.IDs[i] = strconv.Itoa(i)
		g.Vecs[i] = noise(subs[rng.IntN(len(subs))], genPointNoise)
		g.Labels[i] = "d" + strconv.Itoa(rng.IntN(genLabelsCount))
	}
	for range queries {
		g.Queries = append(g.Queries, noise(subs[rng.IntN(len(subs))], genPointNoise))
	}
	return g
}

// Recall is the share of exact's ids that approx found.
func Recall(approx, exact []Hit) float64 {
	if len(exact) == 0 {
		return 1
	}
	found := map[string]bool{}
	for _, h := range approx {
		found[h.ID] = true
	}
	n := 0
	for _, h := range exact {
		if found[h.ID] {
			n++
		}
	}
	return float64(n) / float64(len(exact))
}
