package scripted

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sylk/sylk/agents/llm/llmtest"
)

// Stage is what a pipeline asks an agent: the agent, the stage, the loop
// and the variant's approach ("" for the original).
type Stage struct {
	Agent, Stage string
	Loop         int
	Approach     string
}

var (
	stageLine    = regexp.MustCompile(`^Pipeline \S+, stage "(\w+)" \(loop (\d+)\)`)
	approachLine = regexp.MustCompile(`(?m)^Approach to take: (.+)$`)
)

// StageIn reads the stage and loop a pipeline stage's prompt names.
func StageIn(content string) (stage string, loop int, ok bool) {
	sm := stageLine.FindStringSubmatch(content)
	if sm == nil {
		return "", 0, false
	}
	loop, _ = strconv.Atoi(sm[2])
	return sm[1], loop, true
}

// ApproachIn reads the approach a variant's stage prompt names.
func ApproachIn(content string) (string, bool) {
	am := approachLine.FindStringSubmatch(content)
	if am == nil {
		return "", false
	}
	return am[1], true
}

// StageOf reads a request's stage from its first user message.
func StageOf(req llmtest.Request) (Stage, bool) {
	k := Stage{Agent: AgentOf(req)}
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		var ok bool
		if k.Stage, k.Loop, ok = StageIn(m.Content); !ok {
			return k, false
		}
		k.Approach, _ = ApproachIn(m.Content)
		return k, true
	}
	return k, false
}

// AgentOf reads who asks from a request's system prompt: engineer,
// inspector, tester, or memory for a checkpoint's summary.
func AgentOf(req llmtest.Request) string {
	sys := req.System()
	for _, a := range []struct{ agent, says string }{{"memory", "memory checkpoint"}, {"engineer", "You are the Engineer"},
		{"inspector", "You are the Inspector"}, {"tester", "You are the Tester"}} {
		if strings.Contains(sys, a.says) {
			return a.agent
		}
	}
	return ""
}

// Stages answers pipeline stages from a table: the replies of each stage,
// by step (the assistant turns of its conversation so far). A request
// outside any stage, or past its replies, fails the test.
type Stages struct {
	t       testing.TB
	mu      sync.Mutex
	replies map[Stage][]llmtest.Reply
	seen    map[Stage][]string // the first user message of each call
}

// NewStages is an empty table.
func NewStages(t testing.TB) *Stages {
	return &Stages{t: t, replies: map[Stage][]llmtest.Reply{}, seen: map[Stage][]string{}}
}

// On sets the replies of a stage, by step.
func (s *Stages) On(k Stage, replies ...llmtest.Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies[k] = replies
}

// Respond answers req from the table.
func (s *Stages) Respond(req llmtest.Request) llmtest.Reply {
	k, ok := StageOf(req)
	if !ok {
		s.t.Errorf("a request outside any pipeline stage: %q", req.Last())
		return llmtest.Status(400)
	}
	step := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			step++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if step == 0 {
		for _, m := range req.Messages {
			if m.Role == "user" {
				s.seen[k] = append(s.seen[k], m.Content)
				break
			}
		}
	}
	rs := s.replies[k]
	if step >= len(rs) {
		s.t.Errorf("no reply for %+v step %d", k, step)
		return llmtest.Status(400)
	}
	return rs[step]
}

// Asked returns the first user message of a stage's calls.
func (s *Stages) Asked(k Stage) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen[k]...)
}

// At is the stage of agent at loop, for the variant of approach ("" for
// the original).
func At(agent, stage string, loop int, approach string) Stage {
	return Stage{Agent: agent, Stage: stage, Loop: loop, Approach: approach}
}
