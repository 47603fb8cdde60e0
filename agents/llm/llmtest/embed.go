package llmtest

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// DefaultEmbedDims is the size of the vectors /embeddings answers with when
// the request asks for no dimensions.
const DefaultEmbedDims = 64

// EmbedRequest is what the server received at /embeddings.
type EmbedRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
}

// EmbedReply is one scripted answer of /embeddings; the zero value answers
// normally.
type EmbedReply struct {
	// Status, when not 0 or 200, is an error answer.
	Status int
	// Dims, when set, answers with vectors of this size whatever was asked.
	Dims int
	// Hang never answers.
	Hang bool
}

// ScriptEmbeddings queues answers of /embeddings, taken in order before the
// default (deterministic vectors).
func (s *Server) ScriptEmbeddings(replies ...EmbedReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedScript = append(s.embedScript, replies...)
}

// EmbedCalls is how many /embeddings requests the server received.
func (s *Server) EmbedCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.embeds)
}

// EmbedRequests returns the /embeddings requests received, in order.
func (s *Server) EmbedRequests() []EmbedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRequest(nil), s.embeds...)
}

// Vector is the vector /embeddings answers for text: a hashed bag of its
// words (lower-cased runs of letters and digits) in dims dimensions,
// normalised, so texts sharing words are near and the same text always
// gets the same vector.
func Vector(text string, dims int) []float32 {
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		sign := float32(1)
		if x&1 == 1 {
			sign = -1
		}
		v[(x>>1)%uint64(dims)] += sign
	}
	var norm float64
	for _, x := range v {
		norm += float64(x * x)
	}
	if norm == 0 {
		v[0] = 1 // no words: a fixed direction, not a zero vector
		return v
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(norm))
	}
	return v
}

func (s *Server) embed(w http.ResponseWriter, r *http.Request) {
	var raw struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions,omitempty"`
	}
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "request is not JSON: "+err.Error())
		return
	}
	req := EmbedRequest{Model: raw.Model, Dimensions: raw.Dimensions}
	if err := json.Unmarshal(raw.Input, &req.Input); err != nil {
		var one string
		if err := json.Unmarshal(raw.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "input is neither a string nor a list of strings")
			return
		}
		req.Input = []string{one}
	}
	s.mu.Lock()
	s.embeds = append(s.embeds, req)
	var reply EmbedReply
	if len(s.embedScript) > 0 {
		reply, s.embedScript = s.embedScript[0], s.embedScript[1:]
	}
	release := s.release
	s.mu.Unlock()
	switch {
	case reply.Hang:
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeError(w, reply.Status, "server_error", "llmtest: scripted embeddings status")
		return
	}
	dims := DefaultEmbedDims
	if req.Dimensions > 0 {
		dims = req.Dimensions
	}
	if reply.Dims > 0 {
		dims = reply.Dims
	}
	data := make([]any, len(req.Input))
	tokens := 0
	for i, text := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": Vector(text, dims)}
		tokens += max(1, len(text)/4)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}
