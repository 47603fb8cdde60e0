package skills

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// writeSkill writes root/name/SKILL.md.
func writeSkill(t testing.TB, root, name, text string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func skillText(name, desc, meta, body string) string {
	s := "---\nname: " + name + "\n"
	if desc != "" {
		s += "description: " + desc + "\n"
	}
	if meta != "" {
		s += "metadata:\n" + meta
	}
	return s + "---\n" + body + "\n"
}

func notes(ns []schemas.SkillNote) string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name+": "+n.Reason)
	}
	return strings.Join(out, "\n")
}

func names(sel *schemas.SkillsSelected) []string {
	var out []string
	for _, s := range sel.Skills {
		out = append(out, s.Name)
	}
	return out
}

// The edge cases of seed 003 (L123-129) and the bad inputs, one row
// each: what the catalogue and the selection make of them. None stops the
// selection; each says why.
func TestEdgeCases(t *testing.T) {
	type setup struct {
		project, user string // the two skill directories
	}
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T, s setup)
		req     Request
		check   func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected)
	}{{
		name: "invalid frontmatter: skipped, load failure recorded",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "broken", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
			writeSkill(t, s.project, "nofront", "just markdown, no frontmatter\n")
			writeSkill(t, s.project, "good", skillText("good", "fine", "  tier: 1\n", "Good body."))
		},
		req: Request{Agent: "engineer", Task: "anything"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			if !slices.Contains(names(sel), "good") || slices.Contains(names(sel), "broken") {
				t.Fatalf("selected %v", names(sel))
			}
			got := notes(sel.Failed)
			if !strings.Contains(got, "broken: frontmatter is not valid YAML") || !strings.Contains(got, "nofront: no YAML frontmatter") {
				t.Fatalf("failures:\n%s", got)
			}
		},
	}, {
		name: "duplicate names across directories: the first in search order wins, the other is recorded",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "debugging", skillText("debugging", "the project's own", "  tier: 1\n", "PROJECT BODY"))
			writeSkill(t, s.user, "debugging", skillText("debugging", "the user's", "  tier: 1\n", "USER BODY"))
		},
		req: Request{Agent: "engineer", Task: "fix it"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			i := slices.Index(names(sel), "debugging")
			if i < 0 || sel.Skills[i].Body != "PROJECT BODY" {
				t.Fatalf("selected %+v", sel.Skills)
			}
			var shadow []string
			for _, s := range sel.Shadowed {
				shadow = append(shadow, s.Name+" kept "+s.Kept+" dropped "+s.Dropped)
			}
			if len(shadow) != 2 || !strings.Contains(shadow[0], "kept project .sylk/skills/debugging dropped ") ||
				!strings.Contains(shadow[1], "dropped builtin/debugging") {
				t.Fatalf("shadowed: %v", shadow)
			}
		},
	}, {
		name: "missing or empty description: skipped",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "nodesc", skillText("nodesc", "", "  tier: 1\n", "body"))
			writeSkill(t, s.project, "emptydesc", "---\nname: emptydesc\ndescription: \"  \"\n---\nbody\n")
		},
		req: Request{Agent: "engineer"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			got := notes(sel.Failed)
			for _, n := range []string{"nodesc", "emptydesc"} {
				if !strings.Contains(got, n+": description: missing or empty") || slices.Contains(names(sel), n) {
					t.Fatalf("%s: failures:\n%s", n, got)
				}
			}
		},
	}, {
		name: "the task names unknown skills: recorded, the rest continues",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "special", skillText("special", "only when asked", "  tier: 3\n", "SPECIAL"))
		},
		req: Request{Agent: "engineer", Task: "do it", Hints: []string{"no-such-skill", "special"}},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			if names(sel)[0] != "special" || sel.Strategy != "hint" || sel.Skills[0].Reason != "named by the task" {
				t.Fatalf("selected %+v strategy %s", sel.Skills, sel.Strategy)
			}
			if got := notes(sel.Failed); !strings.Contains(got, `no-such-skill: unknown skill: the task names "no-such-skill", which is not in the catalogue`) {
				t.Fatalf("failures:\n%s", got)
			}
		},
	}, {
		name: "a body over the budget: truncated, with the cap recorded",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "big", skillText("big", "large", "  tier: 1\n", strings.Repeat("é", 300)))
		},
		req: Request{Agent: "engineer", Limits: Limits{MaxBodyChars: 100}},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			i := slices.Index(names(sel), "big")
			if i < 0 {
				t.Fatalf("big not selected: %v", names(sel))
			}
			s := sel.Skills[i]
			if !s.Truncated || s.Chars != 300 || sel.MaxBodyChars != 100 || !strings.HasPrefix(s.Body, strings.Repeat("é", 100)+"\n\n[... skill body truncated to 100") {
				t.Fatalf("%+v", s)
			}
			if len(cat.Warnings) == 0 || cat.Warnings[0].Error() != "project .sylk/skills/big/SKILL.md: body: 300 characters, over the cap of 100: it will be truncated in prompts; move detail to references/" {
				t.Fatalf("warnings %v", cat.Warnings)
			}
		},
	}, {
		// Sylk embeds its built-in skills, so there is no sync to fail; the
		// nearest case is a skills directory that cannot be read.
		name: "a skills directory that cannot be read: recorded, the others still load",
		prepare: func(t *testing.T, s setup) {
			// A file where the directory should be: unreadable as a
			// directory even for root, who reads any permission bits.
			if err := os.RemoveAll(s.user); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.user, []byte("not a directory"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		req: Request{Agent: "engineer"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			if got := notes(sel.Failed); !strings.Contains(got, "cannot read the skills directory") || !strings.Contains(got, "not a directory") {
				t.Fatalf("failures:\n%s", got)
			}
			if !slices.Contains(names(sel), "tool-use") {
				t.Fatalf("the built-in skills did not load: %v", names(sel))
			}
		},
	}, {
		name: "a name that is not the directory's: skipped",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "dir-name", skillText("other-name", "x", "", "body"))
			writeSkill(t, s.project, "Bad_Name", skillText("Bad_Name", "x", "", "body"))
		},
		req: Request{Agent: "engineer"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			got := notes(sel.Failed)
			if !strings.Contains(got, `dir-name: name: "other-name" is not the directory's name "dir-name"`) ||
				!strings.Contains(got, `Bad_Name: name: "Bad_Name" is not a skill name`) {
				t.Fatalf("failures:\n%s", got)
			}
		},
	}, {
		name: "a load trigger that is not a valid pattern: skipped",
		prepare: func(t *testing.T, s setup) {
			writeSkill(t, s.project, "badtrigger", skillText("badtrigger", "x", "  load-trigger: \"fix(|bug\"\n", "body"))
		},
		req: Request{Agent: "engineer", Task: "fix the bug"},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			if got := notes(sel.Failed); !strings.Contains(got, `badtrigger: metadata.load-trigger: "fix(|bug" is not a valid pattern`) {
				t.Fatalf("failures:\n%s", got)
			}
		},
	}, {
		name: "more qualifying skills than the cap: the rest are recorded as skipped",
		prepare: func(t *testing.T, s setup) {
			for i := range 3 {
				n := fmt.Sprintf("extra-%d", i)
				writeSkill(t, s.project, n, skillText(n, "x", fmt.Sprintf("  tier: 1\n  priority: %d\n", 10+i), "body"))
			}
		},
		req: Request{Agent: "engineer", Limits: Limits{MaxSkills: 2}},
		check: func(t *testing.T, cat *Catalogue, sel *schemas.SkillsSelected) {
			// tool-use has priority 90, then extra-2 (12), extra-1, extra-0.
			if got := names(sel); !slices.Equal(got, []string{"tool-use", "extra-2"}) {
				t.Fatalf("selected %v", got)
			}
			if got := notes(sel.Skipped); !strings.Contains(got, "extra-1: tier 1: loaded at agent start, but the cap of 2 skills per step is reached") {
				t.Fatalf("skipped:\n%s", got)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			s := setup{project: filepath.Join(root, "proj", ".sylk", "skills"), user: filepath.Join(root, "user")}
			for _, d := range []string{s.project, s.user} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			c.prepare(t, s)
			cat := Discover(SearchPath(filepath.Join(root, "proj"), []string{s.user}), c.req.Limits.MaxBodyChars)
			c.check(t, cat, Select(cat, c.req))
		})
	}
}

// Progressive disclosure: tier 1 always, tier 2 on a word-bounded,
// case-folded trigger match, tier 3 only when named, other agents' skills
// never.
func TestSelectionTiers(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "always", skillText("always", "x", "  tier: 1\n", "A"))
	writeSkill(t, root, "fixer", skillText("fixer", "x", "  tier: 2\n  load-trigger: fix|bug report\n", "F"))
	writeSkill(t, root, "regex", skillText("regex", "x", "  tier: 2\n  load-trigger: \"v[0-9]+\\\\.[0-9]+\"\n", "R"))
	writeSkill(t, root, "by-keywords", skillText("by-keywords", "x", "  keywords: [latency, throughput]\n", "K"))
	writeSkill(t, root, "pdf-forms", skillText("pdf-forms", "no metadata, its name is its trigger", "", "P"))
	writeSkill(t, root, "special", skillText("special", "x", "  tier: 3\n  load-trigger: fix\n", "S"))
	writeSkill(t, root, "testers-only", skillText("testers-only", "x", "  tier: 1\n  agents: [tester]\n", "T"))
	cat := Discover([]Location{DirLocation("test", root)}, 0)
	if len(cat.Failed) != 0 {
		t.Fatalf("failures: %s", notes(cat.Failed))
	}
	for _, c := range []struct {
		task  string
		hints []string
		want  []string
	}{
		{"write the docs", nil, []string{"always"}},
		{"Please FIX the login", nil, []string{"always", "fixer"}},
		{"add a prefix to names", nil, []string{"always"}}, // "fix" inside "prefix" is not a word
		{"file a Bug  Report", nil, []string{"always", "fixer"}},
		{"bump to V2.10 now", nil, []string{"always", "regex"}},
		{"cut the latency", nil, []string{"always", "by-keywords"}},
		{"fill PDF forms", nil, []string{"always", "pdf-forms"}},
		{"fix it", []string{"special"}, []string{"special", "always", "fixer"}},
		{"anything", []string{"testers-only"}, []string{"always"}},
	} {
		sel := Select(cat, Request{Agent: "engineer", Task: c.task, Hints: c.hints})
		if got := names(sel); !slices.Equal(got, c.want) {
			t.Errorf("%q hints %v: selected %v, want %v (%s)", c.task, c.hints, got, c.want, notes(sel.Failed))
		}
	}
	if sel := Select(cat, Request{Agent: "tester", Task: "x"}); !slices.Equal(names(sel), []string{"always", "testers-only"}) {
		t.Errorf("tester: %v", names(sel))
	}
}

// Every built-in skill is valid and its directory's name.
func TestBuiltinSkillsAreValid(t *testing.T) {
	cat := Discover([]Location{{Name: "builtin", FS: Builtin()}}, 0)
	if len(cat.Failed) > 0 || len(cat.Warnings) > 0 || len(cat.Names) < 5 {
		t.Fatalf("failed %s warnings %v names %v", notes(cat.Failed), cat.Warnings, cat.Names)
	}
	for _, n := range cat.Names {
		if s := cat.Skills[n]; s.Dir != "builtin:"+n || s.Source != "builtin" {
			t.Errorf("%s: dir %s source %s", n, s.Dir, s.Source)
		}
	}
}

// Built-in skills are parsed and listed once per process: each discovery
// gets what a parse gives, as its own copy.
func TestBuiltinSkillsParsedOncePerProcess(t *testing.T) {
	locs := []Location{{Name: "builtin", FS: Builtin()}}
	first := Discover(locs, 0)
	for _, n := range first.Names {
		s := first.Skills[n]
		if s.Metadata == nil {
			t.Fatalf("%s has no metadata", n)
		}
		s.Metadata["changed"] = "by the caller"
	}
	again := Discover(locs, 0)
	for _, n := range again.Names {
		parsed, _ := Parse(Builtin(), n, 0)
		got := *again.Skills[n]
		got.Dir, got.Source = parsed.Dir, parsed.Source // set by Discover
		if !reflect.DeepEqual(&got, parsed) {
			t.Errorf("%s from the process's parse:\n%+v\nparsed:\n%+v", n, &got, parsed)
		}
	}
}

// Validation reports every problem of a file at once.
func TestParseReportsEveryProblem(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "many", "---\nname: Many\nversion: 2\nallowed-tools: {a: b}\nmetadata:\n  tier: 7\n  priority: high\n  load-trigger: \"(\"\n---\n")
	s, probs := Parse(os.DirFS(root), "many", 0)
	if s != nil {
		t.Fatal("a broken skill was returned")
	}
	var got []string
	for _, p := range probs {
		if !errors.Is(p, ErrInvalid) {
			t.Errorf("%v does not match ErrInvalid", p)
		}
		got = append(got, p.Field)
	}
	want := []string{"version", "name", "description", "allowed-tools", "metadata.priority", "metadata.tier", "metadata.load-trigger", "body"}
	if !slices.Equal(got, want) {
		t.Fatalf("fields %v, want %v:\n%v", got, want, probs)
	}
}

// The optional directories are listed; scripts are listed, never run.
func TestParseListsReferencesAssetsAndScripts(t *testing.T) {
	root := t.TempDir()
	dir := writeSkill(t, root, "pack", skillText("pack", "x", "", "body"))
	for _, f := range []string{"references/api.md", "assets/template.txt", "scripts/run.sh"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("touch ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, probs := Parse(os.DirFS(root), "pack", 0)
	if s == nil {
		t.Fatal(probs)
	}
	if !slices.Equal(s.References, []string{"references/api.md"}) || !slices.Equal(s.Assets, []string{"assets/template.txt"}) ||
		!slices.Equal(s.Scripts, []string{"scripts/run.sh"}) {
		t.Fatalf("%v %v %v", s.References, s.Assets, s.Scripts)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("a script ran")
	}
}

func specs(names ...string) []tools.ToolSpec {
	var out []tools.ToolSpec
	for _, n := range names {
		out = append(out, tools.ToolSpec{Name: n, Description: "Does " + n + ". More detail.", Parameters: json.RawMessage(`{}`)})
	}
	return out
}

// request_tools: exactly one of tools, bundle, intent; unknown, forbidden and
// too many are refused with the reason; nothing changes until Load.
func TestRequestTools(t *testing.T) {
	set := NewToolSet("inspector", specs("read_file", "grep", "glob", "list", "exec", "git_diff", "git_status"),
		[]string{"read_file", "grep", "glob", "list", "exec", "git_diff", "git_status", "write_file", "git_commit"}, nil, 3)
	for _, c := range []struct {
		args, loaded, rejected, err string
	}{
		{`{"tools": ["grep", "glob"]}`, "grep,glob", "", ""},
		{`{"tools": ["grep", "write_file", "nope"]}`, "grep", `write_file: permission denied: inspector may not use write_file|nope: unknown tool "nope"`, ""},
		{`{"tools": ["write_file"]}`, "", "write_file: permission denied: inspector may not use write_file", "nothing loaded: every tool asked for was refused"},
		{`{"tools": ["a", "b", "c", "d"]}`, "", "", "too many tools: 4 asked, at most 3 per request"},
		{`{"tools": []}`, "", "", "tools is empty"},
		{`{"bundle": "git"}`, "git_status,git_diff", "git_commit: permission denied: inspector may not use git_commit", ""},
		{`{"bundle": "nope"}`, "", "", `unknown bundle "nope"`},
		{`{"intent": "search the code for the parser"}`, "list,glob,grep", "", ""},
		{`{"intent": "dance"}`, "", "", `no tool fits the intent "dance"`},
		{`{"tools": ["grep"], "bundle": "git"}`, "", "", "give exactly one of tools, bundle or intent (2 given)"},
		{`{}`, "", "", "give exactly one of tools, bundle or intent (0 given)"},
		{`{"tool": "grep"}`, "", "", `unknown field "tool"`},
	} {
		ans := set.Request(json.RawMessage(c.args))
		var rej []string
		for _, r := range ans.Rejected {
			rej = append(rej, r.Name+": "+r.Reason)
		}
		if got := strings.Join(ans.Loaded, ","); got != c.loaded {
			t.Errorf("%s: loaded %q, want %q", c.args, got, c.loaded)
		}
		if got := strings.Join(rej, "|"); !strings.HasPrefix(got, c.rejected) {
			t.Errorf("%s: rejected %q, want %q", c.args, got, c.rejected)
		}
		if !strings.Contains(ans.Error, c.err) || (c.err == "") != (ans.Error == "") {
			t.Errorf("%s: error %q, want %q", c.args, ans.Error, c.err)
		}
	}
	if len(set.LoadedNames()) != 0 {
		t.Fatal("Request changed the set")
	}
	set.Load([]string{"grep"})
	var offered []string
	for _, s := range set.Specs() {
		offered = append(offered, s.Name)
	}
	if !slices.Equal(offered, []string{"grep", "request_tools"}) {
		t.Fatalf("offered %v", offered)
	}
	m := set.Manifest()
	if !strings.Contains(m, "git_diff: Does git_diff.\n") || strings.Contains(m, "write_file") || !strings.Contains(m, "search (find files and text: list, glob, grep)") {
		t.Fatalf("manifest:\n%s", m)
	}
}
