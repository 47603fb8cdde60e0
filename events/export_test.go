package events

import (
	"testing"
	"time"
)

// SetScanHeartbeat sets the idle heartbeat of scans' consumers for one test.
func SetScanHeartbeat(t *testing.T, d time.Duration) {
	old := scanHeartbeat
	scanHeartbeat = d
	t.Cleanup(func() { scanHeartbeat = old })
}

// SetGetAttempt sets how long one JetStream request of Get or a scan waits.
func SetGetAttempt(t *testing.T, d time.Duration) {
	old := getAttempt
	getAttempt = d
	t.Cleanup(func() { getAttempt = old })
}
