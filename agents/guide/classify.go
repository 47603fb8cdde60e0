package guide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/agents/llm"
	"github.com/sylk/sylk/schemas"
)

// Intent types of the classification (seed L2292-2326).
const (
	IntentTrivial     = "TRIVIAL"
	IntentExplicit    = "EXPLICIT"
	IntentExploratory = "EXPLORATORY"
	IntentOpenEnded   = "OPEN_ENDED"
	IntentGitHubWork  = "GITHUB_WORK"
	IntentAmbiguous   = "AMBIGUOUS"
)

// DefaultThreshold is the confidence below which the Guide asks rather than
// routes (seed L2433-2435).
const DefaultThreshold = 0.7

// maxRequest bounds the original request carried in the structured intent.
const maxRequest = 4000

// Completer makes recorded LLM calls: *llm.Client.
type Completer interface {
	Complete(ctx context.Context, d *agents.Delivery, req llm.Request) (schemas.LLMResponse, bool, error)
}

// LLMClassifier is the Classifier of the LLM tier. It asks the model for the
// request's intent type, its confidence and the structured intent (original
// request, key constraints, success criteria), then routes: implementation
// work to the Architect as a plan_request, exploratory questions to the
// Librarian or the Academic when they run (else to the Architect). Below the
// threshold, for AMBIGUOUS requests, and for implementation requests with
// implicit assumptions or unbounded scope it asks the user a
// clarification_request instead of guessing; the answer goes to the
// Architect, which plans with it. Every routed or asked message carries the
// structured intent and the Guide's entry in the confidence chain.
type LLMClassifier struct {
	LLM Completer
	// Threshold is the lowest confidence that routes (default
	// DefaultThreshold).
	Threshold float64
	// Available lists the knowledge agents running (librarian, academic).
	Available []string
}

// classification is the model's answer.
type classification struct {
	IntentType          string   `json:"intent_type"`
	Confidence          float64  `json:"confidence"`
	Reason              string   `json:"reason"`
	AssumptionsExplicit *bool    `json:"assumptions_explicit"`
	ScopeBounded        *bool    `json:"scope_bounded"`
	KeyConstraints      []string `json:"key_constraints"`
	SuccessCriteria     []string `json:"success_criteria"`
	Question            string   `json:"question"`
	Options             []string `json:"options"`
}

const classifyPrompt = `You are the Guide of Sylk, a multi-agent runtime for software work. You do not do the work: you classify
the user's request so it reaches the right agent. Answer with one JSON object and nothing else:
{"intent_type": "TRIVIAL | EXPLICIT | EXPLORATORY | OPEN_ENDED | GITHUB_WORK | AMBIGUOUS",
 "confidence": 0.0 to 1.0, "reason": "one sentence",
 "assumptions_explicit": true or false, "scope_bounded": true or false,
 "key_constraints": ["constraints the user stated, verbatim where possible"],
 "success_criteria": ["how the user will judge it done"],
 "question": "if you would have to guess: the one question to ask", "options": ["A: ...", "B: ..."]}
Types: TRIVIAL is a single-line fix, a typo, an obvious small change. EXPLICIT: the user gave the exact approach.
EXPLORATORY: "how would I", a question to learn or research, no change asked. OPEN_ENDED: work whose scope has
several valid readings. GITHUB_WORK: a PR, an issue or a commit is mentioned. AMBIGUOUS: you cannot tell.
Confidence is how sure you are of the type and of what the user wants. Never invent constraints.`

// Classify routes one message in plain words.
func (c *LLMClassifier) Classify(ctx context.Context, d *agents.Delivery, text string) ([]*schemas.Envelope, error) {
	msgs := []schemas.LLMMessage{{Role: "system", Content: classifyPrompt}, {Role: "user", Content: text}}
	var cl classification
	var problem string
	seen := 0
	for try := 0; try < 2; try++ {
		resp, _, err := c.LLM.Complete(ctx, d, llm.Request{Key: fmt.Sprintf("classify/%d", try), Messages: msgs, Seen: seen, JSON: true})
		if err != nil {
			if class, _ := agents.Classify(ctx, err); class != agents.ClassPermanent {
				return nil, err
			}
			hint := "check the LLM endpoint and model"
			if errors.Is(err, llm.ErrBudgetExceeded) {
				hint = "raise the LLM budget or start a new session"
			}
			return notice(d, "classify-failed", schemas.NoticeError, "could not classify the request: "+err.Error(), hint)
		}
		seen = len(msgs)
		if cl, problem = parseClassification(resp.Content); problem == "" {
			break
		}
		msgs = append(msgs, schemas.LLMMessage{Role: "assistant", Content: resp.Content},
			schemas.LLMMessage{Role: "user", Content: problem + " Reply with the JSON object only."})
	}
	if problem != "" {
		cl = classification{IntentType: IntentAmbiguous, Reason: "the classification could not be read: " + problem}
	}
	intent := &schemas.StructuredIntent{OriginalRequest: truncate(text, maxRequest), KeyConstraints: cl.KeyConstraints,
		SuccessCriteria: cl.SuccessCriteria, IntentType: cl.IntentType}
	entry := schemas.ConfidenceEntry{Agent: Name, Confidence: cl.Confidence, Reason: truncate(cl.Reason, 200)}

	if why := c.unclear(cl); why != "" {
		q := strings.TrimSpace(cl.Question)
		if q == "" {
			q = "What exactly do you want done? Name the files or behaviour, and what done looks like."
		}
		return withIntent(d.Derive(schemas.TypeClarificationRequest, "user", "clarify", schemas.ClarificationRequest{
			Question: q, Options: cl.Options, Context: text, Asker: "architect",
		}))(intent, entry, why)
	}
	if cl.IntentType == IntentExploratory {
		switch {
		case slices.Contains(c.Available, "librarian"):
			return withIntent(d.Derive(schemas.TypeContextRequest, "librarian", "route", schemas.ContextRequest{Query: text}))(intent, entry, "")
		case slices.Contains(c.Available, "academic"):
			return withIntent(d.Derive(schemas.TypeResearchRequest, "academic", "route", schemas.ResearchRequest{Query: text}))(intent, entry, "")
		}
	}
	return withIntent(d.Derive(schemas.TypePlanRequest, "architect", "route", schemas.PlanRequest{Request: text}))(intent, entry, "")
}

// unclear says why the Guide must ask rather than route, or "".
func (c *LLMClassifier) unclear(cl classification) string {
	threshold := c.Threshold
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	implementation := cl.IntentType != IntentExploratory && cl.IntentType != IntentTrivial
	switch {
	case cl.IntentType == IntentAmbiguous:
		return "the request is ambiguous"
	case cl.Confidence < threshold:
		return fmt.Sprintf("confidence %.2f is below %.2f", cl.Confidence, threshold)
	case implementation && cl.AssumptionsExplicit != nil && !*cl.AssumptionsExplicit:
		return "the request rests on implicit assumptions"
	case implementation && cl.ScopeBounded != nil && !*cl.ScopeBounded:
		return "the request has no clear scope"
	}
	return ""
}

func parseClassification(content string) (classification, string) {
	var cl classification
	i, j := strings.IndexByte(content, '{'), strings.LastIndexByte(content, '}')
	if i < 0 || j < i {
		return cl, "That is not a JSON object."
	}
	if err := json.Unmarshal([]byte(content[i:j+1]), &cl); err != nil {
		return cl, "That is not valid JSON: " + err.Error() + "."
	}
	cl.IntentType = strings.ToUpper(strings.TrimSpace(cl.IntentType))
	switch cl.IntentType {
	case IntentTrivial, IntentExplicit, IntentExploratory, IntentOpenEnded, IntentGitHubWork, IntentAmbiguous:
	default:
		return cl, fmt.Sprintf("intent_type %q is not one of the six types.", cl.IntentType)
	}
	if !(cl.Confidence >= 0 && cl.Confidence <= 1) {
		return cl, fmt.Sprintf("confidence %v is not between 0 and 1.", cl.Confidence)
	}
	return cl, ""
}

// withIntent finishes a routed or asked envelope: the structured intent, the
// Guide's confidence entry and, for a question, why it was asked.
func withIntent(env *schemas.Envelope, err error) func(*schemas.StructuredIntent, schemas.ConfidenceEntry, string) ([]*schemas.Envelope, error) {
	return func(intent *schemas.StructuredIntent, entry schemas.ConfidenceEntry, why string) ([]*schemas.Envelope, error) {
		if err != nil {
			return nil, agents.Permanent(err)
		}
		env.StructuredIntent = intent
		env.ConfidenceChain = append(env.ConfidenceChain, entry)
		if env.Priority > schemas.PriorityBackground {
			// A scheduled request stays background work: only the
			// user's own requests get the user's reserve and are never
			// paused under pressure.
			env.Priority = schemas.PriorityUserInteractive
		}
		if why != "" {
			env.Metadata = map[string]string{"asked_because": why}
		}
		return []*schemas.Envelope{env}, nil
	}
}
