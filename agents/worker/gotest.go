package worker

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/schemas"
	"github.com/sylk/sylk/tools"
)

// MaxFailedNames bounds the failing test names TestCounts keeps; Failed
// counts them all.
const MaxFailedNames = 200

// TestCounts is the evidence of a test run, parsed line by line from
// `go test -json` (or `go test -v`) output: never guessed from an exit code.
type TestCounts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	// FailedTests names the first MaxFailedNames failing tests.
	FailedTests []string `json:"failed_tests,omitempty"`
	// BuildFailed lists packages that did not compile: their tests never ran.
	BuildFailed []string `json:"build_failed,omitempty"`
}

// Total is the number of tests that reported a result.
func (c TestCounts) Total() int { return c.Passed + c.Failed + c.Skipped }

// testEvent is one line of `go test -json` (test2json).
type testEvent struct {
	Action  string `json:"Action"`
	Package string `json:"Package"`
	Test    string `json:"Test"`
	Output  string `json:"Output"`
}

var verboseResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)

// Observe reads one line of test output into the counts.
func (c *TestCounts) Observe(line string) {
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "{") {
		var ev testEvent
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Action != "" {
			c.observeJSON(ev)
			return
		}
	}
	if m := verboseResult.FindStringSubmatch(line); m != nil {
		c.count(m[1], m[2])
	}
}

func (c *TestCounts) observeJSON(ev testEvent) {
	switch {
	case ev.Test != "":
		c.count(strings.ToUpper(ev.Action), ev.Package+"."+ev.Test)
	case ev.Action == "fail" && ev.Package != "" && !slices.Contains(c.BuildFailed, ev.Package):
		// A package that fails with no failing test did not build (or its
		// TestMain failed): count it, or a broken build would look green.
		c.BuildFailed = append(c.BuildFailed, ev.Package)
	}
}

func (c *TestCounts) count(result, name string) {
	switch result {
	case "PASS":
		c.Passed++
	case "FAIL":
		c.Failed++
		if len(c.FailedTests) < MaxFailedNames {
			c.FailedTests = append(c.FailedTests, name)
		}
	case "SKIP":
		c.Skipped++
	}
}

// finish drops packages counted as build failures that did have failing tests.
func (c *TestCounts) finish() {
	c.BuildFailed = slices.DeleteFunc(c.BuildFailed, func(pkg string) bool {
		return slices.ContainsFunc(c.FailedTests, func(t string) bool { return strings.HasPrefix(t, pkg+".") })
	})
}

// ParseTestOutput counts the results in a complete test output.
func ParseTestOutput(out string) TestCounts {
	var c TestCounts
	for line := range strings.Lines(out) {
		c.Observe(line)
	}
	c.finish()
	return c
}

// CountTests is the Tester's observer factory (Worker.Observe): it counts the
// results in every line a test command writes to stdout, however long the
// output, and records the counts with the tool result, where ByTests finds
// them (also when a redelivery reuses the record).
func CountTests(*schemas.TaskDispatch) agents.ToolObserver { return &testObserver{} }

// testObserver feeds stdout lines to TestCounts.
type testObserver struct{ c TestCounts }

func (o *testObserver) Line(stream, line string) {
	if stream == tools.StreamStdout {
		o.c.Observe(line)
	}
}

func (o *testObserver) Data() json.RawMessage {
	o.c.finish()
	b, err := json.Marshal(observedData{Counts: &o.c})
	if err != nil {
		return nil
	}
	return b
}

// observedData is the shape of a tool result's Data when an observer counted
// its test results.
type observedData struct {
	Counts *TestCounts `json:"test_counts,omitempty"`
}

// RecordedCounts returns the test counts an observer recorded with res, if
// any.
func RecordedCounts(res schemas.ToolResult) (TestCounts, bool) {
	if res.Data == "" {
		return TestCounts{}, false
	}
	var d observedData
	if err := json.Unmarshal([]byte(res.Data), &d); err != nil || d.Counts == nil {
		return TestCounts{}, false
	}
	return *d.Counts, true
}
