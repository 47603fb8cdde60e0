package hooks

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/sylk/sylk/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The matrix of seed L22726: each agent's git operations, through exec,
// shell lines and the git tools; anything unknown is denied.
func TestGitMatrix(t *testing.T) {
	h := GitPermissions(GitMatrix)
	cases := []struct {
		agent, tool, args string
		allowed           bool
	}{
		{"inspector", "exec", `["git", "status"]`, true},
		{"inspector", "exec", `["git", "-C", "sub", "log", "--oneline"]`, true},
		{"inspector", "exec", `["git", "branch", "-a"]`, true},
		{"inspector", "exec", `["git", "commit", "-m", "x"]`, false},
		{"inspector", "exec", `["/usr/bin/git", "stash"]`, false},
		{"inspector", "git_commit", ``, false},
		{"engineer", "exec", `["git", "add", "a.go"]`, true},
		{"engineer", "git_commit", ``, true},
		{"engineer", "exec", `["git", "checkout", "main"]`, false},
		{"engineer", "exec", `["git", "branch", "feature"]`, false},
		{"engineer", "exec", `["git", "push"]`, false},
		{"architect", "exec", `["git", "checkout", "-b", "x"]`, true},
		{"architect", "exec", `["git", "reset", "--soft", "HEAD~1"]`, true},
		{"architect", "exec", `["git", "reset", "--hard"]`, false},
		{"architect", "exec", `["git", "merge", "x"]`, false},
		{"architect", "exec", `["git", "clone", "u"]`, false},
		{"librarian", "exec", `["git", "clone", "u"]`, true},
		{"librarian", "exec", `["git", "commit"]`, false},
		{"guide", "exec", `["git", "status"]`, false},
		{"engineer", "exec", `["git", "frobnicate"]`, false},
		{"engineer", "exec", `["ls"]`, true},
		{"inspector", "shell", `echo hi; git diff && git commit -am x`, false},
		{"inspector", "shell", `cd sub && git log | head`, true},
	}
	for _, c := range cases {
		d := &Data{Agent: c.agent, Tool: c.tool, Args: map[string]any{}}
		switch c.tool {
		case "exec":
			var argv []any
			for _, w := range strings.Fields(strings.NewReplacer(`[`, "", `]`, "", `"`, "", ",", "").Replace(c.args)) {
				argv = append(argv, w)
			}
			d.Args["argv"] = argv
		case "shell":
			d.Tool, d.Args["command"], d.Args["shell"] = tools.ToolExec, c.args, true
		}
		dec, err := h.Run(context.Background(), d)
		if err != nil || (dec.Action == "") != c.allowed {
			t.Errorf("%s %s %s: decision %+v err %v, want allowed=%v", c.agent, c.tool, c.args, dec, err, c.allowed)
		}
	}
}

// Every problem of a hooks configuration is reported at once, by index,
// name and key.
func TestFromConfigReportsEveryProblem(t *testing.T) {
	_, err := FromConfig([]Config{
		{Name: "ok", Point: "pre_tool", Command: []string{"true"}},
		{Name: "bad name!", Point: "pre-tool", Priority: "soon", Timeout: "forever", Fail: "maybe"},
		{Name: "trig", Point: "pre_prompt", Trigger: []string{"exec"}, Command: []string{"x"}, Timeout: "10m"},
	}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`hooks[1] (bad name!): name: "bad name!" is not a name`,
		`hooks[1] (bad name!): point: unknown point "pre-tool" (one of pre_message, post_message, pre_prompt, post_prompt, pre_tool, post_tool)`,
		`hooks[1] (bad name!): priority: unknown priority "soon"`,
		`hooks[1] (bad name!): command: the program to run is missing`,
		`hooks[1] (bad name!): timeout: "forever" is not a duration`,
		`hooks[1] (bad name!): fail: "maybe" is neither open nor closed`,
		`hooks[2] (trig): trigger: names tools, so the point must be pre_tool or post_tool, not pre_prompt`,
		`hooks[2] (trig): timeout: "10m" is not a duration between 0 and 5m0s`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "hooks[0]") {
		t.Errorf("a valid hook was reported: %v", err)
	}
}

// New refuses duplicate names at a point and triggers off tool points; the
// same name at two points is fine.
func TestNewRefusesBadHooks(t *testing.T) {
	run := func(context.Context, *Data) (Decision, error) { return Decision{}, nil }
	_, err := New(nil,
		Hook{Name: "a", Point: PreTool, Run: run}, Hook{Name: "a", Point: PostTool, Run: run},
		Hook{Name: "a", Point: PreTool, Run: run}, Hook{Name: "t", Point: PreMessage, Trigger: []string{"exec"}, Run: run},
		Hook{Name: "n", Point: PreTool})
	for _, want := range []string{"hook a: two hooks of that name at pre_tool", "hook t: a trigger names tools", "hook n: nothing to run"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
}

// Replace swaps every point's hooks at once (a configuration reload).
func TestReplaceSwapsTheHooks(t *testing.T) {
	run := func(context.Context, *Data) (Decision, error) { return Decision{}, nil }
	p, err := New(nil, Hook{Name: "old", Point: PreTool, Run: run}, Hook{Name: "kept", Point: PostTool, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(nil, Hook{Name: "new", Point: PreTool, Run: run})
	if err != nil {
		t.Fatal(err)
	}
	p.Replace(q)
	if pre, post := p.Order(PreTool), p.Order(PostTool); len(pre) != 1 || pre[0].Name != "new" || len(post) != 0 {
		t.Fatalf("after Replace: pre_tool %v, post_tool %v; want only the new pipeline's hook", pre, post)
	}
}

func TestParsePriority(t *testing.T) {
	for in, want := range map[string]Priority{"first": First, "Early": Early, "normal": Normal, "late": Late, "last": Last, "30": 30, "0": 0, "100": 100} {
		if got, err := ParsePriority(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, in := range []string{"", "101", "-1", "soonish"} {
		if _, err := ParsePriority(in); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}
