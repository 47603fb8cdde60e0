package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/academic"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// A research request, routed by the Guide, is answered by the Academic
// from the ingested documents, without an LLM: each finding cited by
// document and section, with its applicability label.
func TestAcademicAnswersResearchRequests(t *testing.T) {
	r := newRig(t)
	docs := t.TempDir()
	md := filepath.Join(docs, "caching.md")
	if err := os.WriteFile(md, []byte("# Caching\n\n## Invalidation\n\nInvalidate cache entries on write; expire the rest with a TTL.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := academic.NewIngester()
	if err != nil {
		t.Fatal(err)
	}
	ups, err := in.Ingest(r.ctx, nil, []string{docs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := academic.Record(r.ctx, r.log, "_", "user", time.Now(), ups); err != nil {
		t.Fatal(err)
	}
	req, _ := schemas.New(schemas.TypeResearchRequest, "S1", "user", "", time.Now(), schemas.ResearchRequest{Query: "how to invalidate a cache"})
	r.append(req)
	var ans *schemas.ResearchResponse
	brokertest.Eventually(t, 30*time.Second, "the Academic's answer", func() bool {
		for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeResearchResponse}) {
			if e.CorrelationID == req.CorrelationID && e.Source == academic.Name {
				ans, _ = schemas.PayloadAs[schemas.ResearchResponse](e)
				return ans != nil
			}
		}
		return false
	})
	cite := filepath.ToSlash(md) + "#Caching > Invalidation"
	if len(ans.Findings) != 1 || ans.Findings[0].Source != cite || ans.Findings[0].Applicability != academic.Adaptable ||
		!strings.Contains(ans.Answer, "[1] ADAPTABLE (MEDIUM) "+cite) || !strings.Contains(ans.Answer, "BM25 only") {
		t.Fatalf("answer: %+v", ans)
	}
}
