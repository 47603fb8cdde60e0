package schemas

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// The vector store's events: embeddings, each recorded once. An embedding
// is an outside call that costs money and time, so the event is keyed by
// what determines its answer (the model, the dimensions asked for and the
// hash of the text): a rebuild, a redelivery or a replay finds the recorded
// vector and never calls the endpoint again.
const (
	TypeEmbedding Type = "embedding"
)

var vectorTypes = map[Type]typeInfo{
	TypeEmbedding: entry[Embedding]("An embedding vector of a text, recorded once under the hash of the model, the dimensions and the text."),
}

// Embedding is the vector an /embeddings endpoint returned for a text.
type Embedding struct {
	// Key is EmbeddingKey(Model, Dims, TextHash).
	Key   string `json:"key"`
	Model string `json:"model"`
	// Dims is the number of dimensions asked for (0: the model's own);
	// the vector has len(Vector) dimensions either way.
	Dims int `json:"dims,omitempty"`
	// TextHash is TextHash of the text embedded (the text itself is not
	// recorded: it may be a file of the work directory).
	TextHash string    `json:"text_hash"`
	Vector   []float32 `json:"vector,omitempty"`
}

// TextHash is the hash an embedding's text is known by: the first 16 bytes
// of its SHA-256, in hex.
func TextHash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:16])
}

// EmbeddingKey names the embedding of the text with hash textHash by model
// at dims dimensions: the first 16 bytes of the SHA-256 of the three, in
// hex.
func EmbeddingKey(model string, dims int, textHash string) string {
	h := sha256.Sum256([]byte(model + "\x00" + strconv.Itoa(dims) + "\x00" + textHash))
	return hex.EncodeToString(h[:16])
}
