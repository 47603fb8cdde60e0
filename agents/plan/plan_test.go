package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

var testCatalog = Catalog{
	ToolAgents:   []string{"engineer", "inspector", "tester"},
	PromptAgents: []string{"engineer", "inspector", "tester", "librarian", "academic"},
	Tools:        []string{"exec", "read_file", "write_file", "git_commit"},
	Allowed:      func(agent, tool string) bool { return !(agent == "inspector" && tool == "write_file") },
	ArgSchemas:   toolSchemas(),
}

// toolSchemas are the built-in tools' real argument schemas.
func toolSchemas() map[string]json.RawMessage {
	ex, err := tools.NewExecutor(tools.Options{WorkDir: "."})
	if err != nil {
		panic(err)
	}
	out := map[string]json.RawMessage{}
	for _, s := range ex.Schemas() {
		out[s.Name] = s.Parameters
	}
	return out
}

// TestPlans: plan files in, the parsed DAG with its layers, or every problem,
// out. Rewrite the expectations with -rewrite.
func TestPlans(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "mode":
				return modeDAG(t, d.Input)
			case "render":
				var pm projections.PlanMode
				if err := json.Unmarshal([]byte(d.Input), &pm); err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				RenderMode(&b, &pm)
				return b.String()
			case "plan":
			default:
				t.Fatalf("unknown command %s", d.Cmd)
			}
			p, err := Load([]byte(d.Input), testCatalog)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not match ErrInvalid", err)
				}
				return err.Error() + "\n"
			}
			var b strings.Builder
			fmt.Fprintf(&b, "ok: %s policy=%+v\n", p.DAG.Name, p.DAG.Policy)
			for _, n := range p.DAG.Nodes {
				fmt.Fprintf(&b, "node %s agent=%s tool=%s prompt=%q deps=%v timeout=%s args=%v", n.ID, n.Agent, n.Tool, n.Prompt, n.DependsOn, n.Timeout, n.Args)
				if n.Pipeline != "" {
					fmt.Fprintf(&b, " pipeline=%s", n.Pipeline)
				}
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "layers %v\n", Layers(&p.DAG))
			return b.String()
		})
	})
}

// modeDAG is the DAG of a plan-mode plan given as JSON, or its problems.
func modeDAG(t *testing.T, input string) string {
	var mp schemas.ModePlan
	if err := json.Unmarshal([]byte(input), &mp); err != nil {
		t.Fatal(err)
	}
	dag, err := ModeDAG(&mp, testCatalog)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v does not match ErrInvalid", err)
		}
		return err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ok: %s\n", dag.Name)
	for _, n := range dag.Nodes {
		fmt.Fprintf(&b, "node %s agent=%s deps=%v prompt=%q\n", n.ID, n.Agent, n.DependsOn, n.Prompt)
	}
	fmt.Fprintf(&b, "layers %v\n", Layers(dag))
	return b.String()
}
