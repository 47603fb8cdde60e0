package events

import (
	"testing"
	"time"
)

// ackMetadata reads both forms of ack subject the server sends, and refuses
// anything else.
func TestAckMetadata(t *testing.T) {
	want := ackMeta{sseq: 42, dseq: 7, pending: 3, time: time.Unix(0, 1700000000123456789)}
	for _, reply := range []string{
		"$JS.ACK.SYLK.c1.1.42.7.1700000000123456789.3",
		"$JS.ACK._.ACCHASH.SYLK.c1.1.42.7.1700000000123456789.3.tok",
		"$JS.ACK.dom.ACCHASH.SYLK.c1.1.42.7.1700000000123456789.3",
	} {
		got, err := ackMetadata(reply)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", reply, got, err, want)
		}
	}
	for _, reply := range []string{
		"", "$JS.ACK.SYLK.c1.1.42.7.3", "$JS.ACK.SYLK.c1.1.x.7.1700000000123456789.3",
		"$JS.ACK.a.b.c.d.e.f.g.h.i.j.k.l.m",
	} {
		if got, err := ackMetadata(reply); err == nil {
			t.Errorf("%q: %+v, want an error", reply, got)
		}
	}
}
