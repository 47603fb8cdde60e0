package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A stream's messages are read with direct gets (AllowDirect), which any
// member of a replicated stream answers from its own copy. A member applies
// what the leader commits a moment later (and a restarted member answers
// once 90% caught up), so on a cluster a direct get may not yet see a
// message the leader has acknowledged: a read of an event just appended
// would say it does not exist, and a read of the last message on a subject
// could return an older one. The functions below are the reads that must
// see everything acknowledged: on a cluster they are answered by the
// stream's leader (a message get), on one server by its direct get as
// before.

// MsgQuery is a message get's question (nats-server's JSApiMsgGetRequest):
// the message at Seq; the first at or after Seq on subject NextFor; or the
// last on subject LastFor.
type MsgQuery struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

// Clustered reports whether js's connection is to a member of a cluster.
func Clustered(js jetstream.JetStream) bool { return js.Conn().ConnectedClusterName() != "" }

// GetMsg returns stream s's message at seq (s from js). A direct get answers
// it; on a cluster, a direct get that finds nothing is asked again of the
// leader, which holds every acknowledged message (only a miss costs a second
// request). No message is jetstream.ErrMsgNotFound.
func GetMsg(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) && Clustered(js) {
		return LeaderMsg(ctx, js, s.CachedInfo().Config.Name, MsgQuery{Seq: seq})
	}
	return m, err
}

// LastMsgFor returns stream's last message on subject: on a cluster the
// leader's (a member's copy could hold an older last one), on one server its
// direct get. No message is jetstream.ErrMsgNotFound.
func LastMsgFor(ctx context.Context, js jetstream.JetStream, stream, subject string) (*jetstream.RawStreamMsg, error) {
	if Clustered(js) {
		return LeaderMsg(ctx, js, stream, MsgQuery{LastFor: subject})
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.GetLastMsgForSubject(ctx, subject)
}

// LeaderMsg asks stream's leader the message get q: a message get, not a
// direct get, so only the leader answers. No message is
// jetstream.ErrMsgNotFound; a request sent while the cluster elects a leader
// is not answered (see Unanswered).
func LeaderMsg(ctx context.Context, js jetstream.JetStream, stream string, q MsgQuery) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	answer, err := js.Conn().RequestWithContext(ctx, APISubject(js, "STREAM.MSG.GET.", stream), req)
	if err != nil {
		return nil, fmt.Errorf("get %+v from %s's leader: %w", q, stream, err)
	}
	var resp struct {
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(answer.Data, &resp); err != nil {
		return nil, fmt.Errorf("get %+v from %s's leader: %w", q, stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("get %+v from %s's leader: %w", q, stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get %+v from %s's leader: an answer without a message", q, stream)
	}
	m := resp.Message
	raw := &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Seq, Data: m.Data, Time: m.Time}
	if len(m.Header) > 0 {
		if raw.Header, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, fmt.Errorf("get %+v from %s's leader: headers of seq %d: %w", q, stream, m.Seq, err)
		}
	}
	return raw, nil
}

// APISubject is stream's subject of the JetStream API operation op
// ("DIRECT.GET.", "STREAM.MSG.GET.") under js's API prefix.
func APISubject(js jetstream.JetStream, op, stream string) string {
	o := js.Options()
	prefix := jetstream.DefaultAPIPrefix
	switch {
	case o.APIPrefix != "":
		prefix = o.APIPrefix
		if !strings.HasSuffix(prefix, ".") {
			prefix += "."
		}
	case o.Domain != "":
		prefix = "$JS." + o.Domain + ".API."
	}
	return prefix + op + stream
}
