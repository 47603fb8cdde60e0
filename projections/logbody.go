package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sylk/sylk/schemas"
)

// The session log files an index_update (the Librarian's extraction of
// hundreds of files, hundreds of KB an event: two fifths of what an index
// writes to the store) without its payload, which the stream holds: its
// entry is logBodyInStream and then the event's bytes with the payload
// value cut to nil, so the envelope (its type, time, ids) is read from the
// store as any other's. SessionLog reads the whole event back from the
// stream by its sequence (the stream denies deletes and purges), so every
// reader of a session's log gets the event's bytes as they were appended.

// logBodyInStream starts an entry whose payload is left in the stream: a
// byte msgpack never uses, so no envelope starts with it.
const logBodyInStream = 0xc1

// errNoLogSource: a store that reads no stream cannot give back an event
// whose payload its log left there.
var errNoLogSource = errors.New("the session log left the event's payload in the stream, which this store does not read")

// logValue is what the session log files of ev: its bytes, or for an
// index_update with a payload of logBodyMin bytes or more, the bytes
// without it (see logBodyInStream).
func logValue(ev *event) []byte {
	env := ev.env
	if env.Type != schemas.TypeIndexUpdate || len(ev.data) == 0 || ev.data[0] == logBodyInStream {
		return ev.data // (an entry read back from a log, as an as-of fold does, is one already)
	}
	// The payload is cut where its value is in the bytes. The entry is
	// checked to decode as the same envelope; one that would not is filed
	// whole.
	p, d := env.Payload, ev.data
	at := bytes.Index(d, p)
	if len(p) < logBodyMin || at < 0 {
		return d
	}
	v := make([]byte, 0, len(d)-len(p)+2)
	v = append(v, logBodyInStream)
	v = append(v, d[:at]...)
	v = append(v, 0xc0) // nil
	v = append(v, d[at+len(p):]...)
	if head, err := logEnvelope(v); err != nil || head.ID != env.ID || head.Type != env.Type || !head.Timestamp.Equal(env.Timestamp) {
		return d
	}
	return v
}

// logBodyMin is the smallest payload the session log leaves in the stream.
const logBodyMin = 4096

// logEnvelope decodes a session log entry's envelope (without its payload
// when the log left that in the stream).
func logEnvelope(v []byte) (*schemas.Envelope, error) {
	return schemas.Unmarshal(bytes.TrimPrefix(v, []byte{logBodyInStream}))
}

// logBodies puts back in entries the events whose payloads the log left in
// the stream, read from it by sequence.
func (s *Store) logBodies(ctx context.Context, entries []LogEntry) error {
	s.mu.Lock()
	p := s.projector
	s.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if len(e.Data) == 0 || e.Data[0] != logBodyInStream {
			continue
		}
		if p == nil || p.src == nil {
			return fmt.Errorf("seq %d: %w", e.Seq, errNoLogSource)
		}
		ev, err := p.src.Get(ctx, e.Seq)
		if err != nil {
			return fmt.Errorf("session log: read seq %d back from the stream: %w", e.Seq, err)
		}
		if head, herr := logEnvelope(e.Data); herr != nil || ev.Env == nil || ev.Env.ID != head.ID {
			return fmt.Errorf("session log: the stream's event at seq %d is not the one the log filed", e.Seq)
		}
		e.Data = ev.Data
	}
	return nil
}
