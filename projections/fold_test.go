package projections_test

import (
	"testing"

	"github.com/cockroachdb/datadriven"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFold runs the golden files in testdata: events in, projection state out.
// Each file gets its own broker and store. Rewrite the expected output with
// go test ./projections -run TestFold -rewrite.
func TestFold(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		w := newWorld(t)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range td.CmdArgs {
				v := ""
				if len(a.Vals) > 0 {
					v = a.Vals[0]
				}
				args[a.Key] = v
			}
			return w.run(t, td.Cmd, args, td.Input)
		})
	})
}
