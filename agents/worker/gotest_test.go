package worker

import (
	"reflect"
	"testing"
)

func TestParseTestOutput(t *testing.T) {
	for name, c := range map[string]struct {
		out  string
		want TestCounts
	}{
		"json": {`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0}
{"Action":"skip","Package":"p","Test":"TestC","Elapsed":0}
{"Action":"pass","Package":"p","Test":"TestA/sub","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":0.1}
{"Action":"fail","Package":"q","Elapsed":0}
`, TestCounts{Passed: 2, Failed: 1, Skipped: 1, FailedTests: []string{"p.TestB"}, BuildFailed: []string{"q"}}},
		"verbose": {"=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    --- FAIL: TestB/x (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\n",
			TestCounts{Passed: 1, Failed: 2, FailedTests: []string{"TestB/x", "TestB"}}},
		"no evidence": {"ok  \tgithub.com/x/y\t0.01s\n", TestCounts{}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := ParseTestOutput(c.out); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
