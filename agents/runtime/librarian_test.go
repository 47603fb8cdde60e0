package runtime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// A context request, routed by the Guide, is answered by the Librarian from
// the index of the session's work directory, without an LLM; a second
// request after an edit re-indexes the edited file alone.
func TestLibrarianAnswersContextRequests(t *testing.T) {
	r := newRig(t)
	write := writeApp(t, r)
	ask := func(id, q string) schemas.ContextResponse { return askLibrarian(t, r, id, "", q) }
	ans := ask("q1", "where is LoadConfig, the configuration loader?")
	if !strings.Contains(ans.Answer, "config/loader.go:4") || !strings.Contains(ans.Answer, "called by main at main.go:5") ||
		!slices.Contains(ans.References, "config/loader.go:4") || ans.Confidence < 0.9 || !strings.Contains(ans.Answer, "CODEBASE HEALTH") {
		t.Fatalf("answer: %+v", ans)
	}
	updates := func() int { return len(r.events(events.Filter{Session: "S1", Type: schemas.TypeIndexUpdate})) }
	before := updates()
	if before == 0 {
		t.Fatal("no index_update recorded")
	}
	write("config/loader.go", "package config\n\n// LoadSettings reads the TOML settings file.\nfunc LoadSettings(path string) error { return nil }\n")
	ans = ask("q2", "LoadSettings")
	if !strings.Contains(ans.Answer, "config/loader.go:4") {
		t.Fatalf("after the edit: %+v", ans)
	}
	evs := r.events(events.Filter{Session: "S1", Type: schemas.TypeIndexUpdate})
	if len(evs) != before+1 {
		t.Fatalf("%d index updates after one edit, want 1", len(evs)-before)
	}
	p, _ := schemas.PayloadAs[schemas.IndexUpdate](evs[len(evs)-1])
	if len(p.Files) != 1 || p.Files[0].Path != "config/loader.go" {
		t.Fatalf("the edit re-indexed %+v", p)
	}
}

// writeApp writes a small Go module in r's work directory and returns a
// writer of more files there.
func writeApp(t *testing.T, r *rig) func(p, body string) {
	write := func(p, body string) {
		full := filepath.Join(r.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo 1.22\n")
	write("config/loader.go", "package config\n\n// LoadConfig reads the YAML configuration file.\nfunc LoadConfig(path string) error {\n\treturn parse(path)\n}\n\nfunc parse(p string) error { return nil }\n")
	write("main.go", "package main\n\nimport \"example.com/app/config\"\n\nfunc main() { config.LoadConfig(\"x.yaml\") }\n")
	return write
}

// askLibrarian sends the context request q (its id derived from id) to
// target ("": routed by the Guide) in session S1 and returns the answer.
func askLibrarian(t *testing.T, r *rig, id, target, q string) schemas.ContextResponse {
	t.Helper()
	req, _ := schemas.New(schemas.TypeContextRequest, "S1", "user", target, time.Now(), schemas.ContextRequest{Query: q})
	req.ID = schemas.DeriveID(req, id)
	r.append(req)
	var ans schemas.ContextResponse
	brokertest.Eventually(t, 30*time.Second, "the Librarian's answer", func() bool {
		for _, e := range r.events(events.Filter{Session: "S1", Type: schemas.TypeContextResponse}) {
			if e.CorrelationID == req.CorrelationID {
				p, err := schemas.PayloadAs[schemas.ContextResponse](e)
				if err == nil {
					ans = *p
					return true
				}
			}
		}
		return false
	})
	return ans
}

// With an LLM the Librarian writes its answer from what the index
// retrieved: the model is given the question and the retrieval, its words
// lead the answer and the retrieval and its references follow. An LLM that
// refuses for good leaves the retrieval as the answer, saying so.
func TestLibrarianSynthesizesWithAnLLM(t *testing.T) {
	srv := llmtest.New(t)
	srv.Respond(func(req llmtest.Request) llmtest.Reply {
		if !strings.Contains(req.System(), "You are the Librarian") {
			return llmtest.Status(400)
		}
		if strings.Contains(req.Last(), "LoadSettings") {
			return llmtest.Status(400)
		}
		return llmtest.Text("LoadConfig, in config/loader.go:4, reads the YAML configuration; main calls it.")
	})
	r := newRig(t, withLLM(t, srv, llm.Config{}))
	write := writeApp(t, r)
	ans := askLibrarian(t, r, "q1", "librarian", "where is LoadConfig?")
	if !strings.HasPrefix(ans.Answer, "LoadConfig, in config/loader.go:4, reads the YAML configuration; main calls it.\n\nRetrieved from the index:\n") ||
		!strings.Contains(ans.Answer, "func LoadConfig is defined at config/loader.go:4") || !slices.Contains(ans.References, "config/loader.go:4") {
		t.Fatalf("answer: %+v", ans)
	}
	var asked *llmtest.Request
	for _, req := range srv.Requests() {
		if strings.Contains(req.System(), "You are the Librarian") {
			asked = &req
		}
	}
	if asked == nil || !strings.Contains(asked.Last(), "Question: where is LoadConfig?") || !strings.Contains(asked.Last(), "called by main at main.go:5") {
		t.Fatalf("the model was asked %+v", asked)
	}
	write("config/settings.go", "package config\n\n// LoadSettings reads the TOML settings file.\nfunc LoadSettings(path string) error { return nil }\n")
	ans = askLibrarian(t, r, "q2", "librarian", "LoadSettings")
	if !strings.HasPrefix(ans.Answer, "func LoadSettings is defined at config/settings.go:4") || !strings.Contains(ans.Answer, "(the LLM could not write the answer: ") {
		t.Fatalf("the retrieval alone, with why: %+v", ans)
	}
}
