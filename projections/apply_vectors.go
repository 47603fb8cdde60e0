package projections

import (
	"math"
	"strconv"

	"github.com/sylk/sylk/schemas"
)

// applyVectors keeps each recorded embedding under its key (the hash of the
// model, the dimensions and the text), so an embedder finds a vector it
// asked for once and never asks again, and a vector search reads the vectors
// of the texts it ranks. The first record of a key stands; a second, or one
// whose key does not match what it says, is refused.
func applyVectors(t *tx, ev *event) error {
	env := ev.env
	if env == nil || env.Type != schemas.TypeEmbedding {
		return nil
	}
	p, err := payloadOf[schemas.Embedding](t, Vectors, ev)
	if p == nil {
		return err
	}
	if reason := checkEmbedding(p); reason != "" {
		return t.reject(Vectors, ev, "%s", reason)
	}
	k := vectorKey(p.Key)
	old, err := loadCall(t, k)
	if err != nil {
		return err
	}
	if old != nil {
		return t.reject(Vectors, ev, "embedding %s already recorded at seq %d", p.Key, old.seq)
	}
	t.cache.putTransient(k, &callRec{seq: ev.seq, payload: env.Payload})
	return nil
}

// checkEmbedding is why p cannot be kept, or "".
func checkEmbedding(p *schemas.Embedding) string {
	switch {
	case p.Model == "" || p.TextHash == "":
		return "embedding " + quote(p.Key) + " names no model or text hash"
	case p.Key != schemas.EmbeddingKey(p.Model, p.Dims, p.TextHash):
		return "embedding key " + quote(p.Key) + " is not the hash of its model, dimensions and text hash"
	case len(p.Vector) == 0:
		return "embedding " + p.Key + " has no vector"
	case p.Dims > 0 && len(p.Vector) != p.Dims:
		return "embedding " + p.Key + " has " + strconv.Itoa(len(p.Vector)) + " dimensions, not the " + strconv.Itoa(p.Dims) + " asked for"
	}
	for _, x := range p.Vector {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return "embedding " + p.Key + " holds a value that is not a finite number"
		}
	}
	return ""
}

func vectorKey(k string) []byte { return key("vectors/e/", k) }
