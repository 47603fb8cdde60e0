package projections

import (
	"context"
	"fmt"

	"github.com/sylk/sylk/schemas"
)

// MaxEmbeddingKeys bounds the keys of one Embeddings query.
const MaxEmbeddingKeys = 1024

// Embeddings returns the recorded embeddings of keys (schemas.EmbeddingKey)
// by key; a key with none recorded is absent from the map.
func (s *Store) Embeddings(ctx context.Context, keys []string) (map[string]*schemas.Embedding, error) {
	if len(keys) > MaxEmbeddingKeys {
		return nil, fmt.Errorf("%w: embeddings: %d keys, at most %d a query", ErrInvalidQuery, len(keys), MaxEmbeddingKeys)
	}
	out := make(map[string]*schemas.Embedding, len(keys))
	for _, k := range keys {
		if _, ok := out[k]; ok {
			continue
		}
		e, err := s.embedding(k)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out[k] = e
		}
	}
	return out, nil
}

// embedding reads one recorded embedding, nil when there is none.
func (s *Store) embedding(k string) (*schemas.Embedding, error) {
	v, err := s.get(vectorKey(k))
	if err != nil || len(v) < 8 {
		return nil, err
	}
	return schemas.PayloadAs[schemas.Embedding](&schemas.Envelope{Type: schemas.TypeEmbedding, Payload: v[8:]})
}
