package projections

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout: see the package comment. Ids never contain 0x00, so it separates
// them and a prefix ending in 0x00 selects exactly one id's keys.
const sep = 0x00

// key joins parts with sep after a fixed prefix.
func key(prefix string, parts ...string) []byte {
	n := len(prefix)
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n+8)
	b = append(b, prefix...)
	for i, p := range parts {
		if i > 0 {
			b = append(b, sep)
		}
		b = append(b, p...)
	}
	return b
}

// withSeq appends sep and a big-endian sequence to k.
func withSeq(k []byte, seq uint64) []byte {
	k = append(k, sep)
	return binary.BigEndian.AppendUint64(k, seq)
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// under returns the prefix of all keys below k's id: k + sep.
func under(k []byte) []byte { return append(append([]byte(nil), k...), sep) }

// seqSuffix reads the big-endian sequence at the end of k.
func seqSuffix(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

// Keys of each projection.
func sessionKey(sid string) []byte { return key("sessions/s/", sid) }

var (
	sessionsPrefix  = []byte("sessions/s/")
	focusKey        = []byte("sessions/focus")
	globalPauseKey  = []byte("sessions/global")
	dagRunningKey   = []byte("dags/running")
	dagHeaderPrefix = []byte("dags/d/")
	headKey         = []byte("meta/head")
	// rebuildKey marks a store whose rebuild has not finished: set with the
	// drop that starts a rebuild, deleted once the rebuild has folded the
	// whole stream. A store opened with it is rebuilt again.
	rebuildKey = []byte("meta/rebuild")
	// allButTheMark spans every key of the store but rebuildKey (each key
	// begins with a projection's name or "meta/").
	allButTheMark = []pebble.KeyRange{{Start: []byte{0}, End: rebuildKey}, {Start: append(rebuildKey[:len(rebuildKey):len(rebuildKey)], 0), End: []byte{0xff}}}
)

func dagKey(sid, dag string) []byte         { return appendDAGKey(nil, sid, dag) }
func dagNodesPrefix(sid, dag string) []byte { return under(key("dags/n/", sid, dag)) }

// appendDAGKey appends dagKey(sid, dag) to b.
func appendDAGKey(b []byte, sid, dag string) []byte {
	b = append(b, "dags/d/"...)
	b = append(b, sid...)
	b = append(b, sep)
	return append(b, dag...)
}

// appendDAGChunkKey appends the key of chunk c (from 1) of a DAG's nodes to
// b (see dagChunk).
func appendDAGChunkKey(b []byte, sid, dag string, c int) []byte {
	b = append(b, "dags/n/"...)
	b = append(b, sid...)
	b = append(b, sep)
	b = append(b, dag...)
	b = append(b, sep)
	return binary.BigEndian.AppendUint32(b, uint32(c))
}
func dagIDKey(dag, sid string) []byte { return key("dags/id/", dag, sid) }

func dagFrontierKey(sid, dag string) []byte { return appendDAGFrontierKey(nil, sid, dag) }

// appendDAGFrontierKey appends dagFrontierKey(sid, dag) to b.
func appendDAGFrontierKey(b []byte, sid, dag string) []byte {
	b = append(b, "dags/f/"...)
	b = append(b, sid...)
	b = append(b, sep)
	return append(b, dag...)
}
func dagIDPrefix(dag string) []byte { return under(key("dags/id/", dag)) }

func checkpointDAGKey(sid, dag string) []byte { return key("checkpoints/k/", sid, dag) }
func checkpointKey(sid, dag string, seq uint64) []byte {
	return withSeq(key("checkpoints/c/", sid, dag), seq)
}
func checkpointsPrefix(sid string) []byte { return under(key("checkpoints/c/", sid)) }
func checkpointsDAGPrefix(sid, dag string) []byte {
	return under(key("checkpoints/c/", sid, dag))
}

func consultKey(sid, id string) []byte       { return key("consults/c/", sid, id) }
func consultPrefix(sid string) []byte        { return under(key("consults/c/", sid)) }
func planKey(sid string) []byte              { return key("plans/s/", sid) }
func pendingKey(sid, corr string) []byte     { return key("pending/p/", sid, corr) }
func pendingPrefix(sid string) []byte        { return under(key("pending/p/", sid)) }
func pendingAliasKey(sid, id string) []byte  { return key("pending/id/", sid, id) }
func pendingPlanKey(sid, plan string) []byte { return key("pending/plan/", sid, plan) }

func logKey(sid string, seq uint64) []byte { return withSeq(key("log/s/", sid), seq) }
func logPrefix(sid string) []byte          { return under(key("log/s/", sid)) }
func forkKey(sid string) []byte            { return key("log/fork/", sid) }
func globalLogKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("log/g/"), seq)
}

var globalLogPrefix = []byte("log/g/")

func traceKey(corr string, seq uint64) []byte { return withSeq(key("trace/", corr), seq) }
func tracePrefix(corr string) []byte          { return under(key("trace/", corr)) }

func toolCallKey(call string) []byte { return key("calls/tool/", call) }
func llmCallKey(call string) []byte  { return key("calls/llm/", call) }
func skillsCallKey(call string) []byte {
	return key("calls/skills/", call)
}

func loadoutKey(sid, agent string) []byte { return key("skills/a/", sid, agent) }
func scheduleKey(name string) []byte      { return key("schedules/s/", name) }
func scheduleRunKey(sid string) []byte    { return key("schedules/r/", sid) }

func hookCallKey(call string) []byte { return key("calls/hook/", call) }

// History keys end in the entry's time (12 bytes, ordered: see appendTime)
// and stream sequence, so every index lists entries in time order.
var historyEntryPrefix = []byte("history/e/")

// historySuffixLen is the length of the time and sequence that end every
// history key.
const historySuffixLen = 12 + 8

func historySuffix(k []byte, at time.Time, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendTime(k, at), seq)
}
func historyKey(at time.Time, seq uint64) []byte {
	return historySuffix(append([]byte(nil), historyEntryPrefix...), at, seq)
}
func historySessionPrefix(sid string) []byte { return under(key("history/s/", sid)) }
func historyTermPrefix(term string) []byte   { return under(key("history/t/", term)) }
func historyIDKey(id string) []byte          { return key("history/id/", id) }
func historyFailureKey(sig string) []byte    { return key("history/f/", sig) }

var (
	historyPromotedPrefix = []byte("history/p/")
	historyFailuresPrefix = []byte("history/f/")
	historyStatsKey       = []byte("history/stats")
)

func historyCategoryPrefix(cat string) []byte { return under(key("history/c/", cat)) }
func historyEntryKeyOf(indexKey []byte) []byte {
	return append(append([]byte(nil), historyEntryPrefix...), indexKey[len(indexKey)-historySuffixLen:]...)
}

// appendTime appends t as 12 bytes that sort as the times do: the Unix
// seconds with the sign bit flipped, then the nanoseconds.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix())^1<<63)
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func rejectionKey(projection string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(projection+"/rej/"), seq)
}
func rejectionPrefix(projection string) []byte { return []byte(projection + "/rej/") }

func cursorKey(projection string) []byte  { return []byte("meta/cursor/" + projection) }
func versionKey(projection string) []byte { return []byte("meta/version/" + projection) }

func putUint64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func getUint64(b []byte) uint64 {
	if len(b) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func permitKey(sid, id string) []byte { return key("permits/r/", sid, id) }
func permitAliasKey(id string) []byte { return key("permits/id/", id) }

// permitGrantKey is a remembered answer: of one session, or (session "")
// of every session.
func permitGrantKey(sid, action, grant string) []byte {
	return key("permits/g/", sid, action, grant)
}
