package scripted

import (
	"fmt"
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

// The Go module of the pipeline sessions: package calc, a test of Add, and
// Add done wrong and right.
const (
	CalcGo   = "// Package calc adds numbers.\npackage calc\n"
	CalcTest = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(2, 3); got != 5 {\n\t\tt.Fatalf(\"Add(2, 3) = %d, want 5\", got)\n\t}\n}\n"
	WrongAdd = CalcGo + "\n// Add returns a plus b.\nfunc Add(a, b int) int { return a - b }\n"
	RightAdd = CalcGo + "\n// Add returns a plus b.\nfunc Add(a, b int) int { return a + b }\n"
)

// Tool is a reply calling one tool.
func Tool(id, name, args string) llmtest.Reply { return llmtest.Tools(llmtest.Call(id, name, args)) }

// WriteFile is a reply writing content to path.
func WriteFile(id, path, content string) llmtest.Reply {
	return Tool(id, "write_file", fmt.Sprintf(`{"path": %q, "content": %q}`, path, content))
}

// Verdict is a validator's verdict.
func Verdict(passed bool, summary string) llmtest.Reply {
	return llmtest.Text(fmt.Sprintf(`{"passed": %v, "summary": %q, "issues": []}`, passed, summary))
}

// GoTest runs the module's tests.
var GoTest = Tool("t", "exec", `{"argv": ["go", "test", "./..."]}`)

// TDDInTwoLoops scripts a TDD pipeline on the calc module: the Inspector's
// criteria, the Tester's test that fails to build (RED), an Engineer whose
// first Add subtracts, the Tester's failure, and a second loop that passes.
func (s *Stages) TDDInTwoLoops() {
	s.On(At("inspector", "criteria", 1, ""), llmtest.Text("1. Add(a, b int) int returns a+b.\n2. Add(2, 3) is 5."))
	s.On(At("tester", "red", 1, ""), WriteFile("w", "calc_test.go", CalcTest), GoTest, Verdict(false, "TestAdd does not build: Add is undefined"))
	s.On(At("engineer", "implement", 1, ""), WriteFile("w", "calc.go", WrongAdd), llmtest.Text("Added Add to calc.go."))
	s.On(At("inspector", "inspect", 1, ""), Tool("r", "read_file", `{"path": "calc.go"}`), Verdict(true, "Add is there, documented"))
	s.On(At("tester", "test", 1, ""), GoTest, Verdict(false, "TestAdd fails"))
	s.On(At("engineer", "implement", 2, ""), WriteFile("w", "calc.go", RightAdd), llmtest.Text("Fixed Add: a + b."))
	s.On(At("inspector", "inspect", 2, ""), Tool("r", "read_file", `{"path": "calc.go"}`), Verdict(true, "Add sums"))
	s.On(At("tester", "test", 2, ""), GoTest, Verdict(true, "TestAdd passes"))
}

// FailingThreeLoops scripts a standard pipeline whose Inspector finds Add
// wrong in each of three loops.
func (s *Stages) FailingThreeLoops() {
	for loop := 1; loop <= 3; loop++ {
		s.On(At("engineer", "implement", loop, ""), WriteFile("w", "calc.go", WrongAdd), llmtest.Text(fmt.Sprintf("Attempt %d at Add.", loop)))
		s.On(At("inspector", "inspect", loop, ""), Tool("r", "read_file", `{"path": "calc.go"}`),
			llmtest.Text(`{"passed": false, "summary": "Add subtracts", "issues": ["calc.go:5: returns a - b"]}`))
	}
}

// Counting is the approach of TwoVariants' variant, and CountingAdd the Add
// it writes.
const (
	Counting    = "count up in a loop"
	CountingAdd = CalcGo + "\n// Add returns a plus b, by counting.\nfunc Add(a, b int) int {\n\tfor ; b > 0; b-- {\n\t\ta++\n\t}\n\treturn a\n}\n"
)

// TwoVariants scripts a review pipeline whose Engineer waits until the
// file gate exists (so that a variant can be asked for while it works; it
// runs sh),
// then writes RightAdd; and its variant of approach Counting, which writes
// CountingAdd. Both Inspectors pass.
func (s *Stages) TwoVariants(gate string) {
	s.On(At("engineer", "implement", 1, ""),
		Tool("g", "exec", fmt.Sprintf(`{"argv": ["sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done"], "timeout": 60}`, gate)),
		WriteFile("w", "calc.go", RightAdd), llmtest.Text("Add with +."))
	s.On(At("inspector", "inspect", 1, ""), Tool("r", "read_file", `{"path": "calc.go"}`), Verdict(true, "fine"))
	s.On(At("engineer", "implement", 1, Counting), WriteFile("w", "calc.go", CountingAdd), llmtest.Text("Add by counting."))
	s.On(At("inspector", "inspect", 1, Counting), Tool("r", "read_file", `{"path": "calc.go"}`), Verdict(true, "fine too"))
}
