// Package poll waits for a condition by checking it every few milliseconds
// until a deadline: how tests wait for something instead of sleeping. It
// depends on nothing, so the broker's own tests use it as well as
// brokertest.
package poll

import "time"

// Until calls cond every few milliseconds until it returns true, and reports
// whether it did within the time.
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.After(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
	return true
}
