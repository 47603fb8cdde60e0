// Package scripted holds the test server's answers for whole sessions that
// more than one package records: the package that tests a feature and the
// re-execution tests, which record the same session and re-execute it.
package scripted

import (
	"slices"
	"strings"

	"github.com/sylk/sylk/agents/llm/llmtest"
)

// The Architect's plans in PlanMode: the first draft, one with a dependency
// cycle (sent back), and the version the user's "modify" asks for.
const (
	planV1 = `{"action": "plan", "rationale": "smallest change first", "confidence": 0.8,
 "plan": {"title": "validate config", "overview": "Check the name on load.",
          "files": [{"path": "config.go", "action": "modify", "description": "name is required"}],
          "steps": [{"description": "add the check to config.go", "agent": "engineer"}],
          "todos": [{"content": "Add the check", "active_form": "Adding the check", "step": 1}],
          "considerations": ["keep the signature"]}}`
	planCycle = `{"action": "plan", "rationale": "r", "plan": {"title": "loop",
          "steps": [{"description": "a", "agent": "engineer", "depends_on": [2]}, {"description": "b", "agent": "engineer", "depends_on": [1]}]}}`
	planV2 = `{"action": "plan", "rationale": "then review it", "confidence": 0.85,
 "plan": {"title": "validate config, reviewed",
          "files": [{"path": "config.go", "action": "modify"}],
          "steps": [{"description": "add the check to config.go", "agent": "engineer"},
                    {"description": "check config.go has the check", "agent": "inspector", "depends_on": [1]}],
          "todos": [{"content": "Add the check", "step": 1}, {"content": "Review it", "step": 2}, {"content": "Tell the user"}]}}`
)

// PlanMode answers as each agent would in a plan-mode session on a module
// with config.go: the Architect explores (a read, and a write that plan mode
// refuses), drafts a plan with a cycle, then v1 ("validate config"); asked
// to change it, v2 with an Inspector step. The Guide finds a message typed
// meanwhile ambiguous; the Engineer writes the check into config.go and the
// Inspector greps for it.
func PlanMode(req llmtest.Request) llmtest.Reply {
	sys := req.System()
	last := req.Messages[len(req.Messages)-1]
	assistants := 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			assistants++
		}
	}
	switch {
	case strings.Contains(sys, "You are the Guide"):
		return llmtest.Text(`{"intent_type": "AMBIGUOUS", "confidence": 0.3, "reason": "unclear", "question": "log what, where?", "options": ["A: stderr", "B: a file"]}`)
	case strings.Contains(sys, "in plan mode"):
		if strings.Contains(req.Messages[1].Content, "The user wants it changed") {
			return llmtest.Text(planV2)
		}
		switch assistants {
		case 0: // explore: read, and try to write (refused)
			return llmtest.Tools(llmtest.Call("r1", "read_file", `{"path": "config.go"}`),
				llmtest.Call("w1", "write_file", `{"path": "config.go", "content": "package cfg // changed while planning\n"}`))
		case 1:
			return llmtest.Text(planCycle)
		}
		return llmtest.Text(planV1)
	case strings.Contains(sys, "You are the Engineer"):
		if last.Role == "user" {
			return llmtest.Tools(llmtest.Call("w1", "write_file",
				`{"path": "config.go", "content": "package cfg\n\n// Load checks: name is required.\nfunc Load(name string) error { return nil }\n"}`))
		}
		return llmtest.Text("Added the check to config.go.")
	case strings.Contains(sys, "You are the Inspector"):
		if last.Role == "user" {
			return llmtest.Tools(llmtest.Call("g1", "exec", `{"argv": ["grep", "-c", "name is required", "config.go"]}`))
		}
		return llmtest.Text(`{"passed": true, "summary": "config.go has the check", "issues": []}`)
	}
	return llmtest.Status(400)
}

// Consultation: the Engineer consults an agent that does not exist and the
// Librarian; the Librarian tries the Engineer (not allowed) and consults the
// Archivalist; the Archivalist tries the Librarian back (a loop).
func Consultation(req llmtest.Request) llmtest.Reply {
	sys := req.System()
	first := req.Messages[len(req.Messages)-1].Role == "user"
	switch {
	case strings.Contains(sys, "You are the Engineer"):
		if first {
			return llmtest.Tools(llmtest.Call("c1", "consult_designer", `{"question": "colours?"}`),
				llmtest.Call("c2", "consult_librarian", `{"question": "where is the config loader?"}`))
		}
		return llmtest.Text("The loader is in config.go; nothing to change.")
	case strings.Contains(sys, "You are the librarian"):
		if first {
			return llmtest.Tools(llmtest.Call("l1", "consult_engineer", `{"question": "did you write it?"}`),
				llmtest.Call("l2", "consult_archivalist", `{"question": "was config.go changed lately?"}`),
				llmtest.Call("l3", "read_file", `{"path": "config.go"}`))
		}
		return llmtest.Text("config.go, at the root of the module; unchanged lately.")
	case strings.Contains(sys, "You are the archivalist"):
		if first {
			return llmtest.Tools(llmtest.Call("a1", "consult_librarian", `{"question": "which file do you mean?"}`))
		}
		return llmtest.Text("No change to config.go is on record.")
	}
	return llmtest.Status(400)
}

// Memory is an Inspector that reads big.txt again and again until its
// conversation was compacted, then gives its verdict; and the checkpoint
// writer.
func Memory(req llmtest.Request) llmtest.Reply {
	sys := req.System()
	switch {
	case strings.Contains(sys, "memory checkpoint"):
		return llmtest.Text(`{"checks_performed": ["read big.txt"], "issues_found": 0, "validation_state": {"read": true}}`)
	case strings.Contains(sys, "You are the Inspector"):
		for _, m := range req.Messages {
			if strings.Contains(m.Content, "[Memory checkpoint") {
				return llmtest.Text(`{"passed": true, "summary": "read it all", "issues": []}`)
			}
		}
		return llmtest.Tools(llmtest.Call("c", "exec", `{"argv": ["cat", "big.txt"]}`))
	}
	return llmtest.Status(400)
}

// BigFile is a file an Engineer that reads it a few times fills a window of
// 6000 tokens (500 reserved) with, to 95%: the point of its handoff.
var BigFile = strings.Repeat("a line of the file the Engineer reads\n", 40)

// Handoff answers a review pipeline whose Engineer reads big.txt until its
// window fills and hands off; the Engineer of the new pipeline writes Add in
// calc.go and the Inspector passes. hang, when not nil, is asked before the
// checkpoint's call ("checkpoint") and the new Engineer's first call
// ("successor"): true answers with a reply that never comes.
func Handoff(hang func(at string, req llmtest.Request) bool) func(llmtest.Request) llmtest.Reply {
	hangs := func(at string, req llmtest.Request) bool { return hang != nil && hang(at, req) }
	return func(req llmtest.Request) llmtest.Reply {
		answered := slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool { return m.Role == "assistant" })
		handedOff := slices.ContainsFunc(req.Messages, func(m llmtest.Message) bool {
			return m.Role == "user" && strings.Contains(m.Content, "Pipeline handoff 1:")
		})
		switch sys := req.System(); {
		case strings.Contains(sys, "memory checkpoint"):
			if hangs("checkpoint", req) {
				return llmtest.Hanging()
			}
			return llmtest.Text(`{"original_prompt": "add Add", "accomplished": ["read big.txt"], "files_changed": [], "remaining": ["write calc.go"], "context_notes": ""}`)
		case strings.Contains(sys, "You are the Inspector") && answered:
			return llmtest.Text(`{"passed": true, "summary": "Add adds", "issues": []}`)
		case strings.Contains(sys, "You are the Inspector"):
			return llmtest.Tools(llmtest.Call("r", "read_file", `{"path": "calc.go"}`))
		case strings.Contains(sys, "You are the Engineer") && handedOff && answered:
			return llmtest.Text("Wrote Add.")
		case strings.Contains(sys, "You are the Engineer") && handedOff:
			if hangs("successor", req) {
				return llmtest.Hanging()
			}
			return llmtest.Tools(llmtest.Call("w", "write_file", `{"path": "calc.go", "content": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"}`))
		case strings.Contains(sys, "You are the Engineer"):
			return llmtest.Tools(llmtest.Call("c", "exec", `{"argv": ["cat", "big.txt"]}`)) // until the window fills
		}
		return llmtest.Status(400)
	}
}
