package schemas

// The Academic's documents: local files (Markdown, HTML, plain text, PDF)
// ingested into the academic domain. An event carries each document's
// chunks with their text (secrets redacted), so the documents projection is
// whole from the stream: a rebuild reads no file. Embeddings of the chunks
// are recorded apart, as embedding events keyed by the hash of the text
// embedded, so a re-ingested document whose sections did not change costs no
// call.
const (
	TypeDocUpdate Type = "doc_update"
)

var docTypes = map[Type]typeInfo{
	TypeDocUpdate: entry[DocUpdate]("Documents the Academic ingested (chunked by section), removed or skipped with the reason."),
}

// Document formats.
const (
	DocMarkdown = "markdown"
	DocHTML     = "html"
	DocText     = "text"
	DocPDF      = "pdf"
)

// DocUpdate records documents ingested anew (each whole, with the hash of
// the file it was read from), documents gone and files skipped. Documents
// not named are unchanged.
type DocUpdate struct {
	Docs    []Document `json:"docs,omitempty"`
	Removed []string   `json:"removed,omitempty"`
	Skipped []DocSkip  `json:"skipped,omitempty"`
}

// Document is one ingested file.
type Document struct {
	// Path is the file's absolute path, with forward slashes.
	Path string `json:"path"`
	// Hash is TextHash of the file's bytes.
	Hash   string `json:"hash"`
	Size   int64  `json:"size"`
	Format string `json:"format"`
	Title  string `json:"title,omitempty"`
	// Redactions counts the secrets removed from the text.
	Redactions int        `json:"redactions,omitempty"`
	Chunks     []DocChunk `json:"chunks"`
}

// DocChunk is a section of a document (a heading's text up to the next
// heading, a PDF page, a run of paragraphs), cut further when long.
type DocChunk struct {
	// Section names where the chunk is: the heading path ("Install >
	// Linux"), "page 3", or "part 2".
	Section string `json:"section"`
	Text    string `json:"text"`
	// Hash is TextHash(Text); EmbedHash is TextHash of the text its vector
	// is made from (the title and section with the text).
	Hash      string `json:"hash"`
	EmbedHash string `json:"embed_hash"`
}

// DocSkip is a file left out, and why (a PDF that does not parse, binary,
// too large, unreadable, vanished, an unknown format).
type DocSkip struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// ResearchResponse is the Academic's answer: the text, the citations, and
// each finding with its applicability to the work directory (seed
// L17638-17664).
type ResearchResponse struct {
	Answer     string            `json:"answer"`
	References []string          `json:"references,omitempty"`
	Confidence float64           `json:"confidence,omitempty"`
	Findings   []ResearchFinding `json:"findings,omitempty"`
}

// ResearchFinding is one chunk of a document an answer cites.
type ResearchFinding struct {
	// Source cites the chunk: the document's path, "#", its section.
	Source  string  `json:"source"`
	Title   string  `json:"title,omitempty"`
	Section string  `json:"section,omitempty"`
	Excerpt string  `json:"excerpt"`
	Score   float64 `json:"score"`
	// Applicability: DIRECT, ADAPTABLE or INCOMPATIBLE; Confidence: HIGH,
	// MEDIUM or LOW.
	Applicability string `json:"applicability"`
	Confidence    string `json:"confidence"`
	// Alignment says how the finding fits the work directory's code.
	Alignment        string   `json:"codebase_alignment"`
	AdaptationNeeded []string `json:"adaptation_needed,omitempty"`
}
