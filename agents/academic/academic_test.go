package academic

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a real broker, a projections store with its projector running, the
// scripted embedding endpoint and an embedder recording into the stream.
type rig struct {
	t     *testing.T
	ctx   context.Context
	log   *events.Log
	store *projections.Store
	srv   *llmtest.Server
	emb   *llm.Embedder
	in    *Ingester
}

func newRig(t *testing.T) *rig {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options(t))
	ctx := brokertest.Context(t)
	store, err := projections.Open(ctx, projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t)
	e, err := llm.NewEmbedder(llm.Config{BaseURL: srv.URL(), EmbeddingModel: "embed-fake", Timeout: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngester()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, ctx: ctx, log: events.New(b.JetStream()), store: store, srv: srv, emb: e, in: in}
	pctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { store.Projector(r.log).Run(pctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		store.Close()
	})
	return r
}

// add ingests paths as `sylk docs add` does and returns the updates recorded.
func (r *rig) add(paths ...string) []schemas.DocUpdate {
	r.t.Helper()
	known, err := Known(r.ctx, r.store)
	if err != nil {
		r.t.Fatal(err)
	}
	ups, err := r.in.Ingest(r.ctx, known, paths)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(ups) == 0 {
		return nil
	}
	seq, err := Record(r.ctx, r.log, "_", Name, time.Now(), ups)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.WaitFor(r.ctx, seq); err != nil {
		r.t.Fatal(err)
	}
	return ups
}

// embed records the vectors the documents lack and returns what it did.
func (r *rig) embed() EmbedReport {
	r.t.Helper()
	record := llm.RecordTo(r.log, "_", Name, time.Now)
	rep, err := Embed(r.ctx, r.store, r.emb, func(ctx context.Context, embs []schemas.Embedding) (uint64, error) {
		seq, err := record(ctx, embs)
		if err == nil {
			err = r.store.WaitFor(ctx, seq)
		}
		return seq, err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return rep
}

func (r *rig) search(q string, hybrid bool) *projections.DocsResult {
	r.t.Helper()
	dq := projections.DocsQuery{Kind: projections.DocsSearch, Text: q, Limit: 3}
	if hybrid {
		dq.Embedding = &projections.CodeEmbedding{Model: r.emb.Model(), Vector: llmtest.Vector(q, llmtest.DefaultEmbedDims)}
	}
	res, err := r.store.Docs(r.ctx, dq)
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func write(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

const guideMD = `# Resilient clients

Clients of remote services fail in ways worth planning for.

## Retries

Retry idempotent requests a bounded number of times.

## Jitter

Add random jitter to each backoff delay so that clients do not retry in lockstep.
`

// A Markdown file and a PDF are ingested chunk by section (headings, pages),
// each chunk embedded once; ingesting them again records and sends nothing;
// after one section of the Markdown changes, that chunk alone is sent to the
// endpoint again.
func TestIngestMarkdownAndPDF(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	md, pdf := filepath.Join(dir, "guide.md"), filepath.Join(dir, "breakers.pdf")
	write(t, md, []byte(guideMD))
	write(t, pdf, makePDF("Circuit breakers\nOpen the breaker after five failures.", "Half-open state\nLet one probe request through."))

	ups := r.add(dir)
	docs, chunks, skipped := Counts(ups)
	if docs != 2 || chunks != 5 || skipped != 0 {
		t.Fatalf("first add: %d docs, %d chunks, %d skipped; want 2, 5 (3 sections, 2 pages), 0: %+v", docs, chunks, skipped, ups)
	}
	if rep := r.embed(); rep.Sent != 5 || rep.Chunks != 5 || r.srv.EmbedCalls() != 1 {
		t.Fatalf("first embedding: %+v, %d calls", rep, r.srv.EmbedCalls())
	}
	res := r.search("jitter lockstep", false)
	if len(res.Hits) == 0 || res.Hits[0].Path != filepath.ToSlash(md) || res.Hits[0].Section != "Resilient clients > Jitter" || res.Ranking != projections.RankLexical {
		t.Fatalf("search jitter: %+v", res)
	}
	res = r.search("probe request half-open", true)
	if len(res.Hits) == 0 || res.Hits[0].Path != filepath.ToSlash(pdf) || res.Hits[0].Section != "page 2" || res.Ranking != projections.RankHybrid || res.Vectors != 5 {
		t.Fatalf("hybrid search in the PDF: %+v", res)
	}

	if ups := r.add(dir); len(ups) != 0 {
		t.Fatalf("adding the same files again recorded %+v", ups)
	}
	if rep := r.embed(); rep.Sent != 0 || r.srv.EmbedCalls() != 1 {
		t.Fatalf("nothing changed but %+v was sent (%d calls)", rep, r.srv.EmbedCalls())
	}

	write(t, md, []byte(strings.Replace(guideMD, "in lockstep.", "in lockstep; full jitter spreads them best.", 1)))
	ups = r.add(md)
	if docs, _, _ := Counts(ups); docs != 1 {
		t.Fatalf("after the edit: %+v", ups)
	}
	if rep := r.embed(); rep.Sent != 1 || r.srv.EmbedCalls() != 2 {
		t.Fatalf("after one section changed: %+v, %d calls; want that chunk alone in one call", rep, r.srv.EmbedCalls())
	}
	sent := r.srv.EmbedRequests()[1].Input
	if len(sent) != 1 || !strings.Contains(sent[0], "full jitter spreads them best") || !strings.Contains(sent[0], "Resilient clients > Jitter") {
		t.Fatalf("sent %q, want the Jitter section alone", sent)
	}
	res = r.search("full jitter spreads", false)
	if len(res.Hits) == 0 || !strings.Contains(res.Hits[0].Text, "spreads them best") || res.TotalDocs != 2 || res.TotalChunks != 5 {
		t.Fatalf("the new text is not searched: %+v", res)
	}
}

// Files that cannot be ingested are skipped with their reason and stop
// nothing: a PDF that does not parse, a PDF without text, binary and huge
// files, an unknown format, a vanished path; a document that vanishes
// after it was ingested leaves the search.
func TestIngestSkipsBadInput(t *testing.T) {
	r := newRig(t)
	r.in.MaxFileSize = 4096
	dir := t.TempDir()
	good := filepath.Join(dir, "good.md")
	write(t, good, []byte("# Good\n\nTimeouts bound every call.\n"))
	write(t, filepath.Join(dir, "broken.pdf"), []byte("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer\n"))
	write(t, filepath.Join(dir, "blank.pdf"), makePDF(""))
	write(t, filepath.Join(dir, "image.txt"), []byte("GIF89a\x00\x01\x02\xff"))
	write(t, filepath.Join(dir, "huge.md"), []byte(strings.Repeat("big words ", 1000)))
	write(t, filepath.Join(dir, "data.bin"), []byte{1, 2, 3})
	gone := filepath.Join(dir, "gone.md")

	r.add(dir, filepath.Join(dir, "data.bin"), gone)
	list, err := r.store.Docs(r.ctx, projections.DocsQuery{Kind: projections.DocsList})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Docs) != 1 || list.Docs[0].Path != filepath.ToSlash(good) {
		t.Fatalf("ingested %+v, want good.md alone", list.Docs)
	}
	reasons := map[string]string{}
	for _, s := range list.Skipped {
		reasons[filepath.Base(s.Path)] = s.Reason
	}
	for name, want := range map[string]string{
		"broken.pdf": "PDF does not parse", "blank.pdf": "PDF has no text", "image.txt": "binary",
		"huge.md": "too large: 10000 bytes, at most 4096", "data.bin": "unknown format", "gone.md": "vanished",
	} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%s: reason %q, want %q", name, reasons[name], want)
		}
	}

	if err := os.Remove(good); err != nil {
		t.Fatal(err)
	}
	r.add(good)
	if res := r.search("timeouts", false); len(res.Hits) != 0 || res.TotalDocs != 0 {
		t.Fatalf("a vanished document is still searched: %+v", res)
	}
}

// Each finding of an answer cites its document and section and is labelled
// against the code of the work directory: DIRECT when it names a
// declaration there, INCOMPATIBLE when its examples are in a language the
// code does not use (with the adaptation), ADAPTABLE when it is general.
func TestResearchLabelsApplicability(t *testing.T) {
	r := newRig(t)
	work := t.TempDir()
	write(t, filepath.Join(work, "go.mod"), []byte("module example.com/app\n\ngo 1.22\n"))
	write(t, filepath.Join(work, "retry/retry.go"), []byte("package retry\n\n// RetryPolicy says how often to retry.\ntype RetryPolicy struct{ Max int }\n"))
	ix, err := librarian.NewIndexer(work)
	if err != nil {
		t.Fatal(err)
	}
	if _, seq, err := librarian.Update(r.ctx, r.store, ix, nil, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
		return librarian.Record(ctx, r.log, "_", librarian.Name, time.Now(), ups)
	}); err != nil || r.store.WaitFor(r.ctx, seq) != nil {
		t.Fatalf("index: %v", err)
	}
	docs := t.TempDir()
	md := filepath.Join(docs, "retries.md")
	write(t, md, []byte("# Retry patterns\n\n## Budgets\n\nGive RetryPolicy a retry budget per client.\n\n"+
		"## Decorators\n\nWrap the retry budget in a decorator:\n\n```python\n@retry(budget=3)\ndef fetch(): ...\n```\n\n"+
		"## Principles\n\nA retry budget caps the load retries add during an outage.\n"))
	r.add(docs)

	ans, err := Answer(r.ctx, r.store, ix.Root, "retry budget", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]schemas.ResearchFinding{}
	for _, f := range ans.Findings {
		got[f.Section] = f
	}
	cite := filepath.ToSlash(md) + "#Retry patterns > "
	for section, want := range map[string]string{"Budgets": Direct, "Decorators": Incompatible, "Principles": Adaptable} {
		f := got["Retry patterns > "+section]
		if f.Applicability != want || f.Source != cite+section || !slices.Contains(ans.References, f.Source) {
			t.Errorf("%s: %+v, want %s cited as %s", section, f, want, cite+section)
		}
	}
	if f := got["Retry patterns > Budgets"]; !strings.Contains(f.Alignment, "RetryPolicy (retry/retry.go:4)") || f.Confidence != "HIGH" {
		t.Errorf("the direct finding: %+v", f)
	}
	if f := got["Retry patterns > Decorators"]; len(f.AdaptationNeeded) != 1 || !strings.Contains(f.AdaptationNeeded[0], "ADAPTATION NEEDED: codebase uses go, research suggests python") {
		t.Errorf("the incompatible finding: %+v", f)
	}
	if !strings.Contains(ans.Answer, "DIRECT (HIGH)") || !strings.Contains(ans.Answer, "Codebase maturity: GREENFIELD") {
		t.Errorf("answer text:\n%s", ans.Answer)
	}
}
