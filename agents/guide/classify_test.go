package guide

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/agents/llm/llmtest"
	"github.com/sylk/sylk/schemas"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func classifierFixture(t *testing.T, available ...string) (*llmtest.Stack, *llmtest.Server) {
	st := llmtest.NewStack(t)
	srv := llmtest.New(t)
	c, err := llm.NewClient(llm.Config{BaseURL: srv.URL(), Model: "fake", NoStream: true, Timeout: 5 * time.Second}, llm.Deps{Records: st.Store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st.Run(Name, &Guide{Classifier: &LLMClassifier{LLM: c, Available: available}})
	return st, srv
}

func routed(t *testing.T, st *llmtest.Stack) *schemas.Envelope {
	t.Helper()
	var out *schemas.Envelope
	st.Eventually(20*time.Second, "the Guide's answer", func() bool {
		for _, e := range st.Events("") {
			switch e.Type {
			case schemas.TypeLLMRequest, schemas.TypeLLMResponse, schemas.TypeLLMUsage:
			default:
				if e.Source == Name {
					out = e
				}
			}
		}
		return out != nil && st.Idle(Name)
	})
	return out
}

// A clear implementation request goes to the Architect with the structured
// intent and the Guide's confidence.
func TestClassifierRoutesToTheArchitect(t *testing.T) {
	st, srv := classifierFixture(t)
	srv.Script(llmtest.Text(`{"intent_type": "explicit", "confidence": 0.92, "reason": "clear change to one function",
		"assumptions_explicit": true, "scope_bounded": true,
		"key_constraints": ["no new dependencies"], "success_criteria": ["invalid configs are rejected with a message"]}`))
	in := st.Send("S1", "user", "", schemas.TypeUserInput, schemas.UserInput{Text: "add input validation to the config loader, no new dependencies"})
	out := routed(t, st)
	p, err := schemas.PayloadAs[schemas.PlanRequest](out)
	if err != nil || out.Target != "architect" || p.Request != "add input validation to the config loader, no new dependencies" {
		t.Fatalf("routed %s to %s: %+v", out.Type, out.Target, p)
	}
	si := out.StructuredIntent
	if si == nil || si.IntentType != IntentExplicit || si.OriginalRequest != p.Request || si.KeyConstraints[0] != "no new dependencies" || len(si.SuccessCriteria) != 1 {
		t.Fatalf("intent %+v", si)
	}
	if len(out.ConfidenceChain) != 1 || out.ConfidenceChain[0].Agent != Name || out.ConfidenceChain[0].Confidence != 0.92 {
		t.Fatalf("chain %+v", out.ConfidenceChain)
	}
	if out.ParentID != in.ID || out.CorrelationID != in.CorrelationID || out.Priority != schemas.PriorityUserInteractive {
		t.Fatalf("lineage/priority %+v", out)
	}
	if req := srv.Requests()[0]; req.ResponseFormat == nil || !strings.Contains(req.System(), "AMBIGUOUS") {
		t.Fatal("the classification call did not ask for the JSON classification")
	}
}

// Below the threshold, or with implicit assumptions, the Guide asks instead of
// guessing; the answer goes to the Architect.
func TestClassifierAsksBelowTheThreshold(t *testing.T) {
	for name, reply := range map[string]string{
		"low confidence": `{"intent_type": "OPEN_ENDED", "confidence": 0.55, "reason": "which API?", "question": "Which API do you mean?", "options": ["A: REST", "B: gRPC"]}`,
		"ambiguous":      `{"intent_type": "AMBIGUOUS", "confidence": 0.9, "reason": "two readings"}`,
		"implicit":       `{"intent_type": "EXPLICIT", "confidence": 0.8, "assumptions_explicit": false, "scope_bounded": true}`,
	} {
		t.Run(name, func(t *testing.T) {
			st, srv := classifierFixture(t)
			srv.Script(llmtest.Text(reply))
			st.Send("S1", "user", "", schemas.TypeUserInput, schemas.UserInput{Text: "add caching to the API"})
			out := routed(t, st)
			q, err := schemas.PayloadAs[schemas.ClarificationRequest](out)
			if err != nil || out.Target != "user" || q.Asker != "architect" || q.Context != "add caching to the API" || q.Question == "" {
				t.Fatalf("%s to %s: %+v", out.Type, out.Target, q)
			}
			if out.Metadata["asked_because"] == "" || out.StructuredIntent == nil || len(out.ConfidenceChain) != 1 {
				t.Fatalf("envelope %+v", out)
			}
			if st.Count(schemas.TypePlanRequest) != 0 {
				t.Fatal("routed although unsure")
			}
		})
	}
}

// An unreadable classification is asked for again once, then treated as
// ambiguous.
func TestClassifierRepairsOnceThenAsks(t *testing.T) {
	st, srv := classifierFixture(t)
	srv.Script(llmtest.Text("I think it is explicit."), llmtest.Text(`{"intent_type": "SOMETHING", "confidence": 2}`))
	st.Send("S1", "user", "", schemas.TypeUserInput, schemas.UserInput{Text: "fix it"})
	out := routed(t, st)
	if out.Type != schemas.TypeClarificationRequest || srv.Calls() != 2 {
		t.Fatalf("%s after %d calls", out.Type, srv.Calls())
	}
	if !strings.Contains(srv.Requests()[1].Last(), "not a JSON object") {
		t.Fatalf("repair message %q", srv.Requests()[1].Last())
	}
}

// Exploratory questions go to the Librarian when it runs.
func TestClassifierRoutesExploratoryToTheLibrarian(t *testing.T) {
	st, srv := classifierFixture(t, "librarian")
	srv.Script(llmtest.Text(`{"intent_type": "EXPLORATORY", "confidence": 0.95, "reason": "a question"}`))
	st.Send("S1", "user", "", schemas.TypeUserInput, schemas.UserInput{Text: "how is the config loaded?"})
	out := routed(t, st)
	if out.Type != schemas.TypeContextRequest || out.Target != "librarian" {
		t.Fatalf("%s to %s", out.Type, out.Target)
	}
}
