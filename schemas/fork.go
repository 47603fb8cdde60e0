package schemas

// TypeSessionFork creates a session whose history is another session's up to a
// point. The event's session is the new one; it is the first event of that
// session. Nothing of the parent is copied into the stream: readers of the
// fork's log follow the lineage.
const TypeSessionFork Type = "session_fork"

// SessionFork names the parent session and the last stream sequence of the
// parent's history the fork shares.
type SessionFork struct {
	Parent    string `json:"parent"`
	ParentSeq uint64 `json:"parent_seq"`
	Name      string `json:"name,omitempty"`
	// Reason says why the fork was made ("what-if: reject the plan",
	// "re-execution of S1 went live at seq 42").
	Reason string `json:"reason,omitempty"`
	// Continued: the fork's own events continue the parent's work in flight
	// at the point (a live re-execution kept as a fork): its nodes
	// dispatched or running then stay so, not dispatched again.
	Continued bool `json:"continued,omitempty"`
}

var forkTypes = map[Type]typeInfo{
	TypeSessionFork: entry[SessionFork]("Fork a session at a point of its history: a new session that shares the parent's events up to parent_seq and goes on from there."),
}
