package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream names and the subjects they hold.
const (
	// Stream holds every event: sylk.v1.<session>.<source>.<target>.<type>.
	Stream         = "SYLK"
	StreamSubjects = "sylk.v1.>"
	// DLQStream holds dead letters: sylk.dlq.<consumer>.
	DLQStream         = "SYLK_DLQ"
	DLQStreamSubjects = "sylk.dlq.>"
)

// StreamConfig is the configuration of the SYLK stream: file storage, kept
// forever, duplicates dropped by Nats-Msg-Id, direct get and atomic batches on,
// and append-only: the server refuses to delete or purge its messages (and,
// once set, to turn that off).
func StreamConfig(dupWindow time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               Stream,
		Description:        "Sylk event log: every message between the user and the agents",
		Subjects:           []string{StreamSubjects},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardOld,
		Duplicates:         dupWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         true,
		DenyPurge:          true,
	}
}

// DLQStreamConfig is the configuration of the dead-letter stream.
func DLQStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        DLQStream,
		Description: "Sylk dead letters: original bytes and headers, with reason, consumer and delivery count",
		Subjects:    []string{DLQStreamSubjects},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		AllowDirect: true,
	}
}

// ProvisionStreams creates the streams, or brings existing ones to the expected
// configuration. Running it again changes nothing. replicas is the number of
// copies a cluster keeps; 0 creates one and leaves an existing stream's.
// maxBytes > 0 is the SYLK stream's disk quota (WithQuota).
func ProvisionStreams(ctx context.Context, js jetstream.JetStream, dupWindow time.Duration, replicas int, maxBytes int64) error {
	return provisionStreams(ctx, js, dupWindow, replicas, maxBytes, jetstream.FileStorage, true)
}

// provisionStreams is ProvisionStreams with the streams kept in storage;
// without update (a client's), they are made only when the event stream is
// missing, and left as they are otherwise: a client may lack the right to
// read the dead letters' stream (an observer), and an existing event stream
// says a server provisioned both.
func provisionStreams(ctx context.Context, js jetstream.JetStream, dupWindow time.Duration, replicas int, maxBytes int64, storage jetstream.StorageType, update bool) error {
	if !update {
		_, err := js.Stream(ctx, Stream)
		if err == nil {
			return nil
		}
		if unavailable(err) {
			return fmt.Errorf("read stream %s: %w", Stream, errors.Join(err, ErrStreamUnavailable))
		}
	}
	for _, cfg := range []jetstream.StreamConfig{WithQuota(StreamConfig(dupWindow), maxBytes), DLQStreamConfig()} {
		cfg.Replicas, cfg.Storage = replicas, storage
		if err := provision(ctx, js, cfg, update); err != nil {
			return err
		}
	}
	return nil
}

// WithQuota gives the SYLK stream's configuration a disk quota of maxBytes
// (none when 0): once full, the server refuses new events (discard new)
// rather than dropping old ones, which an event log cannot lose.
func WithQuota(cfg jetstream.StreamConfig, maxBytes int64) jetstream.StreamConfig {
	cfg.MaxBytes = -1
	if maxBytes > 0 {
		cfg.MaxBytes, cfg.Discard = maxBytes, jetstream.DiscardNew
	}
	return cfg
}

// ErrQuotaBelowUse refuses a disk quota smaller than what the SYLK stream
// holds: the server would refuse every new event at once, and an event log
// drops none of its old ones to make room.
var ErrQuotaBelowUse = errors.New("the quota is below what the event stream holds")

// SetQuota changes the SYLK stream's disk quota in place (none when
// maxBytes <= 0), as WithQuota sets it at provisioning, and returns the quota
// it had (0: none). A quota below the stream's size is refused with
// ErrQuotaBelowUse.
func SetQuota(ctx context.Context, js jetstream.JetStream, maxBytes int64) (int64, error) {
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return 0, fmt.Errorf("read stream %s: %w", Stream, err)
	}
	info := s.CachedInfo()
	was := max(info.Config.MaxBytes, 0)
	if maxBytes > 0 && info.State.Bytes > uint64(maxBytes) {
		return was, fmt.Errorf("%w: %d bytes against %d; raise it, or leave it unset for none", ErrQuotaBelowUse, maxBytes, info.State.Bytes)
	}
	cfg := info.Config
	cfg.Discard = StreamConfig(cfg.Duplicates).Discard
	if cfg = WithQuota(cfg, maxBytes); byteLimit(cfg.MaxBytes) == byteLimit(info.Config.MaxBytes) && cfg.Discard == info.Config.Discard {
		return was, nil
	}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		if unavailable(err) {
			err = errors.Join(err, ErrStreamUnavailable)
		}
		return was, fmt.Errorf("update stream %s: %w", Stream, err)
	}
	return was, nil
}

func provision(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, update bool) error {
	s, err := js.Stream(ctx, want.Name)
	if err == nil {
		if !update {
			return nil
		}
		have := s.CachedInfo().Config
		if want.Replicas == 0 {
			want.Replicas = have.Replicas
		}
		if sameStreamConfig(have, want) {
			return nil
		}
		if _, err := js.UpdateStream(ctx, want); err != nil {
			if unavailable(err) {
				// Its info came (from a member's cache), its update did not:
				// nobody leads it now.
				err = errors.Join(err, ErrStreamUnavailable)
			}
			return fmt.Errorf("update stream %s: %w", want.Name, explainReplicas(err, want.Replicas))
		}
		return nil
	}
	if unavailable(err) {
		return fmt.Errorf("read stream %s: %w", want.Name, errors.Join(err, ErrStreamUnavailable))
	}
	if _, err := js.CreateStream(ctx, want); err != nil {
		var api *jetstream.APIError
		if errors.As(err, &api) && api.ErrorCode == errCodeStreamNameInUse {
			// It exists, yet its info did not come: nobody leads it.
			err = errors.Join(err, ErrStreamUnavailable)
		}
		return fmt.Errorf("create stream %s: %w", want.Name, explainReplicas(err, want.Replicas))
	}
	return nil
}

// ErrStreamUnavailable is wrapped when a stream exists but no server answers
// for it.
var ErrStreamUnavailable = errors.New("no server answers for the stream: its leader is down, too few cluster members are up, " +
	"or this side of a split cluster is the minority (try again once the members see each other)")

// errCodeStreamNameInUse is the JetStream API error of a create whose stream
// exists with another configuration (or whose info its creator could not
// read).
const errCodeStreamNameInUse = 10058

// unavailable reports whether a stream request got no answer: no server
// leads the stream (or the JetStream cluster) now.
func unavailable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description &&
		len(have.Subjects) == 1 && len(want.Subjects) == 1 && have.Subjects[0] == want.Subjects[0] &&
		have.Storage == want.Storage && have.Retention == want.Retention &&
		(want.Duplicates == 0 || have.Duplicates == want.Duplicates) &&
		have.AllowDirect == want.AllowDirect && have.AllowAtomicPublish == want.AllowAtomicPublish &&
		have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge &&
		byteLimit(have.MaxBytes) == byteLimit(want.MaxBytes) && have.Discard == want.Discard &&
		max(have.Replicas, 1) == max(want.Replicas, 1)
}

// byteLimit is a stream's MaxBytes as the server stores it: 0 (unset) and
// any negative value both mean no limit, stored as -1.
func byteLimit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}
