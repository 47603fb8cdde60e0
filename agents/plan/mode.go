package plan

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// FileActions are the actions a plan-mode plan may take on a file.
var FileActions = []string{"create", "modify", "delete"}

// ModeDAG is the DAG of a plan drafted in plan mode: step N is the prompt
// node "step-N" of its agent, depending on the steps it names; the files the
// plan changes travel in each prompt. It returns every problem of the plan at
// once, the DAG's own (unknown agents, cycles) included: a plan whose steps
// depend on each other in a circle is refused, never run.
func ModeDAG(mp *schemas.ModePlan, cat Catalog) (*schemas.DAG, error) {
	var probs Problems
	add := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if strings.TrimSpace(mp.Title) == "" {
		add(`the plan needs a "title"`)
	}
	if len(mp.Steps) == 0 {
		add(`the plan needs "steps"`)
	}
	for i, f := range mp.Files {
		if strings.TrimSpace(f.Path) == "" {
			add("file #%d: the path is empty", i+1)
		}
		if !slices.Contains(FileActions, f.Action) {
			add("file %q: action %q is not one of %s", f.Path, f.Action, strings.Join(FileActions, ", "))
		}
	}
	for i, td := range mp.Todos {
		if td.Step < 0 || td.Step > len(mp.Steps) {
			add("todo #%d (%q): step %d does not exist (1 to %d, or 0 for the whole plan)", i+1, td.Content, td.Step, len(mp.Steps))
		}
	}
	dag := &schemas.DAG{Name: mp.Title, Policy: schemas.Policy{FailFast: false}}
	files := filesNote(mp.Files)
	for i, st := range mp.Steps {
		n := i + 1
		if strings.TrimSpace(st.Description) == "" {
			add("step %d: the description is empty", n)
		}
		node := schemas.Node{ID: projections.PlanStepNode(n), Agent: st.Agent, Prompt: st.Description + files}
		for _, dep := range st.DependsOn {
			if dep < 1 || dep > len(mp.Steps) {
				add("step %d depends on step %d, which does not exist (1 to %d)", n, dep, len(mp.Steps))
				continue
			}
			node.DependsOn = append(node.DependsOn, projections.PlanStepNode(dep))
		}
		dag.Nodes = append(dag.Nodes, node)
	}
	if err := Validate(dag, nil, cat); err != nil {
		probs = append(probs, err.(Problems)...)
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return dag, nil
}

func filesNote(files []schemas.PlanFile) string {
	if len(files) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nFiles the plan changes:")
	for _, f := range files {
		fmt.Fprintf(&b, "\n- %s %s", f.Action, f.Path)
		if f.Description != "" {
			b.WriteString(": " + f.Description)
		}
	}
	return b.String()
}

// Glyph is how a step or todo status is shown (seed L36217-36297).
func Glyph(status string) string {
	switch status {
	case schemas.StepInProgress:
		return "[~]"
	case schemas.StepCompleted:
		return "[x]"
	case schemas.StepFailed:
		return "[!]"
	case schemas.StepSkipped:
		return "[-]"
	}
	return "[ ]"
}

// RenderMode writes a session's plan mode for a person: the state, the
// current plan with its files, its steps and todos with their glyphs, and
// what it considered.
func RenderMode(w io.Writer, pm *projections.PlanMode) {
	v := pm.Current()
	if v == nil {
		fmt.Fprintf(w, "Session %s: plan mode %s, no plan yet\n", pm.Session, pm.State)
		return
	}
	p := v.Plan
	fmt.Fprintf(w, "Plan %s v%d (session %s): %s\n", v.PlanID, v.Version, pm.Session, p.Title)
	fmt.Fprintf(w, "State: %s\n", pm.State)
	if p.Overview != "" {
		fmt.Fprintf(w, "\n%s\n", p.Overview)
	}
	if len(p.Files) > 0 {
		fmt.Fprintln(w, "\nFiles:")
		for _, f := range p.Files {
			fmt.Fprintf(w, "  %-6s %s", f.Action, f.Path)
			if f.Description != "" {
				fmt.Fprintf(w, "  %s", f.Description)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "\nSteps:")
	for i, st := range p.Steps {
		fmt.Fprintf(w, "  %s %d. %s (%s)", Glyph(at(pm.Steps, i)), i+1, firstLine(st.Description), st.Agent)
		if len(st.DependsOn) > 0 {
			deps := make([]string, len(st.DependsOn))
			for j, d := range st.DependsOn {
				deps[j] = fmt.Sprint(d)
			}
			fmt.Fprintf(w, " after %s", strings.Join(deps, ", "))
		}
		fmt.Fprintln(w)
	}
	if len(p.Todos) > 0 {
		fmt.Fprintln(w, "\nTodos:")
		for i, td := range p.Todos {
			text := td.Content
			if at(pm.Todos, i) == schemas.StepInProgress && td.ActiveForm != "" {
				text = td.ActiveForm
			}
			fmt.Fprintf(w, "  %s %s\n", Glyph(at(pm.Todos, i)), text)
		}
	}
	if len(p.Considerations) > 0 {
		fmt.Fprintln(w, "\nConsiderations:")
		for _, c := range p.Considerations {
			fmt.Fprintf(w, "  - %s\n", c)
		}
	}
	if pm.FailureReason != "" {
		fmt.Fprintf(w, "\nFailed at step %d: %s\n", pm.FailedStep, pm.FailureReason)
	}
	if v.Rationale != "" {
		fmt.Fprintf(w, "\nWhy: %s\n", v.Rationale)
	}
}

func at(xs []string, i int) string {
	if i < len(xs) {
		return xs[i]
	}
	return schemas.StepPending
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
