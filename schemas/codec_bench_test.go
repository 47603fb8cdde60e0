package schemas

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// benchEnvelope is a ~1 KB envelope: a task dispatch with arguments and a
// confidence chain, the common shape on the stream.
func benchEnvelope(tb testing.TB) *Envelope {
	env, err := New(TypeTaskDispatch, "S1", "orchestrator", "engineer", time.Now(), TaskDispatch{
		DAGID: "dag-1", NodeID: "build", Attempt: 1, Agent: "engineer", Tool: "exec",
		Args:    map[string]any{"argv": []any{"go", "build", "./..."}, "dir": "svc", "note": strings.Repeat("x", 700)},
		Timeout: 5 * time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
	env.ConfidenceChain = []ConfidenceEntry{{Agent: "guide", Confidence: 0.95, Reason: "explicit plan"}}
	env.Metadata = map[string]string{"client": "cli"}
	return env
}

// BenchmarkCodec times a full encode+decode of the same 1 KB envelope through
// Sylk's msgpack codec (validation included) and through encoding/json, interleaved
// in one loop so both see the same machine. x_vs_json is the speed ratio; the
// target is at least 3.
func BenchmarkCodec(b *testing.B) {
	env := benchEnvelope(b)
	// The JSON side does the same work: the envelope with its typed payload, out
	// and back in. plain drops Envelope's own MarshalJSON.
	type plain Envelope
	type jsonEnvelope struct {
		plain
		Payload *TaskDispatch `json:"payload"`
	}
	in := jsonEnvelope{plain: plain(*env)}
	in.Payload, _ = PayloadAs[TaskDispatch](env)

	var msgpackTime, jsonTime time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		buf, err := Marshal(env)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Unmarshal(buf); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		jbuf, err := json.Marshal(&in)
		if err != nil {
			b.Fatal(err)
		}
		var out jsonEnvelope
		if err := json.Unmarshal(jbuf, &out); err != nil {
			b.Fatal(err)
		}
		msgpackTime += mid.Sub(start)
		jsonTime += time.Since(mid)
	}
	b.ReportMetric(float64(msgpackTime.Nanoseconds())/float64(b.N), "msgpack_ns/op")
	b.ReportMetric(float64(jsonTime.Nanoseconds())/float64(b.N), "json_ns/op")
	b.ReportMetric(float64(jsonTime)/float64(msgpackTime), "x_vs_json")
}
