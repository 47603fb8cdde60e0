package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// Defaults of the embedder.
const (
	// DefaultEmbedBatch is how many texts one /embeddings call carries.
	DefaultEmbedBatch = 64
	// DefaultEmbedTimeout bounds one /embeddings call.
	DefaultEmbedTimeout = time.Minute
)

// Errors of the embedder.
var (
	// ErrNoEmbeddings: no embedding model is configured, so search is
	// lexical only.
	ErrNoEmbeddings = errors.New("no embedding model is configured")
	// ErrEmbedding wraps every failure of the endpoint: it failed, timed
	// out, or answered with the wrong number of vectors or dimensions.
	ErrEmbedding = errors.New("the embedding endpoint failed")
)

// EmbedHint tells a user how to turn embeddings on.
const EmbedHint = "set llm.embedding_model in the config or SYLK_LLM_EMBEDDING_MODEL (and SYLK_LLM_EMBEDDING_DIMS to ask for fewer dimensions)"

// EmbeddingReader finds recorded embeddings (projections.Reader is one).
type EmbeddingReader interface {
	Embeddings(ctx context.Context, keys []string) (map[string]*schemas.Embedding, error)
}

// RecordEmbeddings appends embeddings as events and returns the stream
// sequence of the last.
type RecordEmbeddings func(ctx context.Context, embs []schemas.Embedding) (uint64, error)

// Embedder turns texts into vectors through an OpenAI-compatible
// /embeddings endpoint. Every vector is recorded as an embedding event keyed
// by the model, the dimensions and the text's hash before it is used, and a
// text whose embedding is recorded is never sent again: a rebuild, a
// redelivery or a replay costs nothing.
type Embedder struct {
	api     *openai.Client
	model   string
	dims    int
	timeout time.Duration
	// Batch is how many texts a call carries (default DefaultEmbedBatch).
	Batch int
}

// NewEmbedder returns the embedder cfg configures; ErrNoEmbeddings when it
// names no embedding model.
func NewEmbedder(cfg Config, hc *http.Client) (*Embedder, error) {
	if cfg.EmbeddingModel == "" {
		return nil, fmt.Errorf("%w: %s", ErrNoEmbeddings, EmbedHint)
	}
	if cfg.EmbeddingDims < 0 {
		return nil, fmt.Errorf("%w: embedding_dims %d is negative", ErrInvalidConfig, cfg.EmbeddingDims)
	}
	cfg.EnsureDefaults()
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	if hc != nil {
		oc.HTTPClient = hc
	}
	return &Embedder{api: openai.NewClientWithConfig(oc), model: cfg.EmbeddingModel, dims: cfg.EmbeddingDims, timeout: min(cfg.Timeout, DefaultEmbedTimeout)}, nil
}

// Model is the embedding model.
func (e *Embedder) Model() string { return e.model }

// Dims is the number of dimensions asked for (0: the model's own).
func (e *Embedder) Dims() int { return e.dims }

// Key is the embedding key of a text with hash textHash.
func (e *Embedder) Key(textHash string) string {
	return schemas.EmbeddingKey(e.model, e.dims, textHash)
}

// Embed returns the vectors of texts, in order, and how many texts were
// sent to the endpoint: the recorded ones are read from r, the others are
// asked for, recorded through rec, and only then returned.
func (e *Embedder) Embed(ctx context.Context, r EmbeddingReader, rec RecordEmbeddings, texts []string) ([][]float32, int, error) {
	out := make([][]float32, len(texts))
	keys := make([]string, len(texts))
	hashes := make([]string, len(texts))
	for i, t := range texts {
		hashes[i] = schemas.TextHash(t)
		keys[i] = e.Key(hashes[i])
	}
	var missing []int
	known := map[string][]float32{}
	for lo := 0; lo < len(keys); lo += maxKeysPerRead {
		got, err := r.Embeddings(ctx, keys[lo:min(lo+maxKeysPerRead, len(keys))])
		if err != nil {
			return nil, 0, err
		}
		for k, emb := range got {
			known[k] = emb.Vector
		}
	}
	asked := map[string]bool{}
	for i, k := range keys {
		if v, ok := known[k]; ok {
			out[i] = v
		} else if !asked[k] {
			asked[k] = true
			missing = append(missing, i)
		}
	}
	batch := e.Batch
	if batch <= 0 {
		batch = DefaultEmbedBatch
	}
	sent := 0
	for lo := 0; lo < len(missing); lo += batch {
		idx := missing[lo:min(lo+batch, len(missing))]
		in := make([]string, len(idx))
		for j, i := range idx {
			in[j] = texts[i]
		}
		vecs, err := e.call(ctx, in)
		sent += len(in)
		if err != nil {
			return nil, sent, err
		}
		embs := make([]schemas.Embedding, len(idx))
		for j, i := range idx {
			embs[j] = schemas.Embedding{Key: keys[i], Model: e.model, Dims: e.dims, TextHash: hashes[i], Vector: vecs[j]}
			known[keys[i]] = vecs[j]
		}
		if _, err := rec(ctx, embs); err != nil {
			return nil, sent, err
		}
	}
	for i, k := range keys {
		out[i] = known[k]
	}
	return out, sent, nil
}

// maxKeysPerRead keeps each lookup within projections.MaxEmbeddingKeys.
const maxKeysPerRead = 512

// call asks the endpoint for the vectors of in and checks the answer.
func (e *Embedder) call(ctx context.Context, in []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.api.CreateEmbeddings(ctx, openai.EmbeddingRequest{Input: in, Model: openai.EmbeddingModel(e.model), Dimensions: e.dims})
	if err != nil {
		return nil, fmt.Errorf("%w: model %s: %w", ErrEmbedding, e.model, err)
	}
	if len(resp.Data) != len(in) {
		return nil, fmt.Errorf("%w: model %s: %d vectors for %d texts", ErrEmbedding, e.model, len(resp.Data), len(in))
	}
	out := make([][]float32, len(in))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(in) || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: model %s: the answer's index %d is out of place", ErrEmbedding, e.model, d.Index)
		}
		switch {
		case len(d.Embedding) == 0:
			return nil, fmt.Errorf("%w: model %s: an empty vector", ErrEmbedding, e.model)
		case e.dims > 0 && len(d.Embedding) != e.dims:
			return nil, fmt.Errorf("%w: model %s: a vector of %d dimensions, %d asked for", ErrEmbedding, e.model, len(d.Embedding), e.dims)
		case len(d.Embedding) != len(resp.Data[0].Embedding):
			return nil, fmt.Errorf("%w: model %s: vectors of %d and %d dimensions in one answer", ErrEmbedding, e.model, len(resp.Data[0].Embedding), len(d.Embedding))
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// EmbeddingEvents turns embeddings into events of session from source, each
// with an id derived from its key, so recording one twice appends it once.
func EmbeddingEvents(session, source string, now time.Time, embs []schemas.Embedding) ([]*schemas.Envelope, error) {
	out := make([]*schemas.Envelope, 0, len(embs))
	for _, e := range embs {
		env, err := schemas.New(schemas.TypeEmbedding, session, source, "user", now, e)
		if err != nil {
			return nil, err
		}
		env.ID = schemas.DeriveID(&schemas.Envelope{ID: e.Key, Timestamp: now}, "embedding")
		out = append(out, env)
	}
	return out, nil
}

// RecordTo is a RecordEmbeddings that appends to log, pipelined.
func RecordTo(log *events.Log, session, source string, now func() time.Time) RecordEmbeddings {
	return func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		envs, err := EmbeddingEvents(session, source, now(), embs)
		if err != nil {
			return 0, err
		}
		return log.AppendPipelined(ctx, envs)
	}
}
