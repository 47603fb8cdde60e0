package librarian

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// EmbedTextBytes bounds the text of a file that is embedded: its path and
// the start of its redacted text (embedding models read a few thousand
// tokens at most, and the start of a file says what it is about).
const EmbedTextBytes = 4000

// EmbedText is the text a file's vector is made from: its path, a newline,
// and the start of its redacted text, cut at a character boundary.
func EmbedText(rel, redacted string) string {
	return rel + "\n" + embedStart(rel, redacted)
}

// embedStart is the start of redacted that EmbedText keeps.
func embedStart(rel, redacted string) string {
	room := max(EmbedTextBytes-len(rel)-1, 0)
	if len(redacted) > room {
		cut := room
		for cut > 0 && !utf8.RuneStart(redacted[cut]) {
			cut--
		}
		redacted = redacted[:cut]
	}
	return redacted
}

// embedHash is schemas.TextHash(EmbedText(rel, redacted)) without making
// a new text (the indexer computes it for every file): the text is built
// in buf, which is kept for the next file.
func embedHash(rel, redacted string, buf *[]byte) string {
	b := append((*buf)[:0], rel...)
	b = append(b, '\n')
	b = append(b, embedStart(rel, redacted)...)
	*buf = b
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// EmbedReport is what an embedding pass did.
type EmbedReport struct {
	// Files have a vector recorded (now or before).
	Files int `json:"files"`
	// Sent is how many texts went to the endpoint (0 when every vector was
	// recorded already).
	Sent int `json:"sent"`
	// Changed files were left for the next index update: their text is not
	// the one indexed any more.
	Changed int `json:"changed,omitempty"`
}

// Embed records the vectors of the indexed files of ix's root that have
// none under e's model: each such file is read again and, if its text is
// still the one indexed (same embed hash), embedded and recorded through
// rec. Files whose vector is recorded are not read.
func (ix *Indexer) Embed(ctx context.Context, r projections.Reader, e *llm.Embedder, rec llm.RecordEmbeddings) (EmbedReport, error) {
	res, err := r.Code(ctx, projections.CodeQuery{Root: ix.Root, Kind: projections.CodeEmbeds})
	if err != nil {
		return EmbedReport{}, err
	}
	var rep EmbedReport
	todo, err := MissingVectors(ctx, r, e, res.Hashes)
	if err != nil {
		return rep, err
	}
	rep.Files = len(res.Hashes) - len(todo)
	var texts []string
	for _, p := range todo {
		text, ok := ix.embedText(p)
		if !ok || schemas.TextHash(text) != res.Hashes[p] {
			rep.Changed++
			continue
		}
		texts = append(texts, text)
	}
	if len(texts) == 0 {
		return rep, nil
	}
	_, sent, err := e.Embed(ctx, r, rec, texts)
	rep.Sent = sent
	if err == nil {
		rep.Files += len(texts)
	}
	return rep, err
}

// MissingVectors lists the ids of hashes (id -> the hash of its text)
// whose vector by e's model is not recorded, sorted: what an embedding pass
// sends, and nothing else.
func MissingVectors(ctx context.Context, r llm.EmbeddingReader, e *llm.Embedder, hashes map[string]string) ([]string, error) {
	ids := slices.Sorted(maps.Keys(hashes))
	var missing []string
	for lo := 0; lo < len(ids); lo += projections.MaxEmbeddingKeys {
		chunk := ids[lo:min(lo+projections.MaxEmbeddingKeys, len(ids))]
		keys := make([]string, len(chunk))
		for i, id := range chunk {
			keys[i] = e.Key(hashes[id])
		}
		have, err := r.Embeddings(ctx, keys)
		if err != nil {
			return nil, err
		}
		for i, id := range chunk {
			if have[keys[i]] == nil {
				missing = append(missing, id)
			}
		}
	}
	return missing, nil
}

// embedText reads the file at rel and returns its EmbedText; false when it
// cannot be read or is too large now.
func (ix *Indexer) embedText(rel string) (string, bool) {
	if _, ok := tools.SensitiveFile(rel); ok {
		return "", false
	}
	full := filepath.Join(filepath.FromSlash(ix.Root), filepath.FromSlash(rel))
	st, err := os.Lstat(full)
	if err != nil || !st.Mode().IsRegular() || st.Size() > ix.maxSize() {
		return "", false
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", false
	}
	text, _ := ix.redact(string(b))
	return EmbedText(rel, text), true
}
