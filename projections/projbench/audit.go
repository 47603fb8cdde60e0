package projbench

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/events/audit"
	"github.com/sylk/sylk/events/eventbench"
	"github.com/sylk/sylk/schemas"
)

// TargetAuditVerify: `sylk audit verify` reads, hashes and checks the stream at least half as
// fast as a bare ordered consumer reads it.
const TargetAuditVerify = 0.5

// AuditVerify measures `sylk audit verify` against a raw read of the same
// stream, in the same run (`go test -bench` and `sylk bench audit` run it):
// it generates (or reuses) a stream of cfg.Events events, signs it with
// the audit Signer (a checkpoint every 100 sequences, as `sylk serve` does),
// and measures a full `audit verify` against a bare ordered-consumer read of
// the same stream. The stream is generated under cfg.Dir/audit; Sizes,
// Samples and Logger are not used.
func AuditVerify(ctx context.Context, cfg Config) ([]eventbench.Comparison, error) {
	cfg.EnsureDefaults()
	ds, err := Generate(ctx, filepath.Join(cfg.Dir, "audit"), cfg.Events, cfg.Progress)
	if err != nil {
		return nil, err
	}
	b, err := ds.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	key, err := audit.LoadKey(ds.Dir)
	if err != nil {
		return nil, err
	}
	js := b.JetStream()
	if err := sign(ctx, js, key, ds, cfg.Progress); err != nil {
		return nil, err
	}
	n, err := events.New(js).LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	pub := key.Public().(ed25519.PublicKey)
	var read, verify eventbench.Measure
	for round := range cfg.Rounds {
		cfg.Progress(fmt.Sprintf("round %d/%d: raw ordered-consumer read of %d messages", round+1, cfg.Rounds, n))
		runtime.GC()
		r, err := RawRead(ctx, js, int(n))
		if err != nil {
			return nil, err
		}
		read = eventbench.Faster(read, r)
		cfg.Progress(fmt.Sprintf("round %d/%d: audit verify of %d messages", round+1, cfg.Rounds, n))
		runtime.GC()
		var rep *audit.Report
		r, err = eventbench.Time("sylk audit verify (read, hash, chain, check signatures)", int(n), func() error {
			rep, err = audit.Verify(ctx, js, pub, 0, 0)
			return err
		})
		if err != nil {
			return nil, err
		}
		if !rep.Valid || rep.Events != n {
			return nil, fmt.Errorf("audit verify of the generated stream: valid=%v, %d of %d messages, problems %v", rep.Valid, rep.Events, n, rep.Problems)
		}
		verify = eventbench.Faster(verify, r)
	}
	return []eventbench.Comparison{
		eventbench.Compare(fmt.Sprintf("audit verify vs raw ordered read (%d messages)", n), verify, read, TargetAuditVerify),
	}, nil
}

// sign runs the Signer on the dataset until its checkpoints cover every
// generated event, once per dataset (a marker file says it was done).
func sign(ctx context.Context, js jetstream.JetStream, key ed25519.PrivateKey, ds *Dataset, progress func(string)) error {
	marker := filepath.Join(ds.Dir, "signed")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	progress(fmt.Sprintf("signing %d events: a checkpoint every %d", ds.Events, audit.DefaultInterval))
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- (&audit.Signer{JS: js, Key: key}).Run(sctx) }()
	err := waitSigned(ctx, js, uint64(ds.Events))
	stop()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	return os.WriteFile(marker, nil, 0o644)
}

// waitSigned polls until a checkpoint covers sequence to and every range
// the stream completes: the checkpoints are messages of the stream too, so
// signing them leaves fewer than an interval unsigned at the end.
func waitSigned(ctx context.Context, js jetstream.JetStream, to uint64) error {
	stream, err := js.Stream(ctx, broker.Stream)
	if err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Minute)
	for {
		m, err := stream.GetLastMsgForSubject(ctx, audit.CheckpointSubject)
		switch {
		case err == nil:
			env, err := schemas.Unmarshal(m.Data)
			if err != nil {
				return err
			}
			cp, err := schemas.PayloadAs[schemas.AuditCheckpoint](env)
			if err != nil {
				return err
			}
			info, err := stream.Info(ctx)
			if err != nil {
				return err
			}
			if last := info.State.LastSeq; cp.ToSeq >= to && cp.ToSeq >= last/audit.DefaultInterval*audit.DefaultInterval {
				return nil
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the signer did not reach seq %d in 10 minutes", to)
		case <-tick.C:
		}
	}
}
