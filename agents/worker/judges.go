package worker

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sylk/sylk/schemas"
)

// ByExit is the Engineer's judgement: the tool did what was asked (exit 0, in
// time) or it did not. Failures that a rerun may cure are retryable; refusals
// (unknown tool, permission, bad arguments) are not.
func ByExit(_ *schemas.TaskDispatch, res schemas.ToolResult) Verdict {
	v := Verdict{OK: res.OK, Summary: summary(res), Evidence: evidence(res)}
	if !res.OK {
		v.Retryable = res.ExitCode != -1 || res.TimedOut
	}
	return v
}

func summary(res schemas.ToolResult) string {
	switch {
	case res.Summary != "" && res.Error != "" && !res.OK:
		return res.Summary + ": " + res.Error
	case res.Summary != "":
		return res.Summary
	case res.Error != "":
		return res.Error
	}
	return fmt.Sprintf("%s exited %d", res.Tool, res.ExitCode)
}

// evidence is the tail of the tool's output, where what went wrong usually is.
func evidence(res schemas.ToolResult) string {
	out := strings.TrimSpace(strings.Join(nonEmpty(res.Output, res.Stdout, res.Stderr), "\n"))
	const max = 4000
	if len(out) > max {
		out = "…" + out[len(out)-max:]
	}
	return out
}

func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if strings.TrimSpace(x) != "" {
			out = append(out, x)
		}
	}
	return out
}

// ByTests is the Tester's judgement: success needs parsed evidence, tests that
// ran and none that failed. It reports a test_results event either way. The
// counts are those an observer recorded over the whole output (CountTests),
// else those parsed from the output the result kept, which a truncated result
// undercounts.
func ByTests(node *schemas.TaskDispatch, res schemas.ToolResult) Verdict {
	c, ok := RecordedCounts(res)
	if !ok {
		c = ParseTestOutput(res.Output + "\n" + res.Stdout)
	}
	results := schemas.TestResults{
		DAGID: node.DAGID, NodeID: node.NodeID, Passed: c.Passed, Failed: c.Failed, Skipped: c.Skipped,
		FailedTests: c.FailedTests, Evidence: evidence(res),
	}
	v := Verdict{Evidence: results.Evidence, Extra: []Extra{{Type: schemas.TypeTestResults, Payload: results}}}
	counts := fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
	switch {
	case len(c.BuildFailed) > 0:
		v.Summary = fmt.Sprintf("%s; did not build: %s", counts, strings.Join(c.BuildFailed, ", "))
	case c.Failed > 0:
		v.Summary = fmt.Sprintf("%s; failing: %s", counts, names(c.FailedTests, c.Failed))
		v.Retryable = true
	case c.Total() == 0:
		v.Summary = "no test evidence: the output reports no test results (" + summary(res) + ")"
	case !res.OK:
		v.Summary = counts + "; but " + summary(res)
		v.Retryable = true
	default:
		v.OK, v.Summary = true, counts
	}
	return v
}

// GoTestJSON makes a `go test` node report per-test results: it adds -json
// unless the node asked for -json or -v already, so the Tester has evidence.
func GoTestJSON(args map[string]any) map[string]any {
	argv, ok := args["argv"].([]any)
	if !ok || len(argv) < 2 || argv[0] != "go" || argv[1] != "test" {
		return args
	}
	for _, a := range argv[2:] {
		if a == "-json" || a == "-v" || a == "-test.v" {
			return args
		}
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = v
	}
	out["argv"] = append([]any{"go", "test", "-json"}, argv[2:]...)
	return out
}

var finding = regexp.MustCompile(`^\S+\.\w+:\d+(:\d+)?: .+`)

// ByFindings is the Inspector's judgement: a check passes when it exits 0 and
// reports no file:line findings. It reports a validation_result either way.
func ByFindings(node *schemas.TaskDispatch, res schemas.ToolResult) Verdict {
	var issues []string
	for _, out := range []string{res.Output, res.Stdout, res.Stderr} {
		for line := range strings.Lines(out) {
			if l := strings.TrimSpace(line); finding.MatchString(l) {
				issues = append(issues, l)
			}
		}
	}
	passed := res.OK && len(issues) == 0
	v := Verdict{OK: passed, Evidence: evidence(res), Extra: []Extra{{Type: schemas.TypeValidationResult, Payload: schemas.ValidationResult{
		DAGID: node.DAGID, NodeID: node.NodeID, Passed: passed, Issues: issues, Evidence: evidence(res),
	}}}}
	switch {
	case passed:
		v.Summary = "no findings: " + summary(res)
	case len(issues) > 0:
		v.Summary = fmt.Sprintf("%d findings; first: %s", len(issues), issues[0])
	default:
		v.Summary = summary(res)
		v.Retryable = res.ExitCode != -1
	}
	return v
}

// names lists the first few of n names.
func names(list []string, n int) string {
	const show = 20
	s := strings.Join(list[:min(len(list), show)], ", ")
	if n > show {
		s += fmt.Sprintf(" and %d more", n-min(len(list), show))
	}
	return s
}
