package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
)

// stateReader is where a command reads projected state. With `sylk serve`
// running it asks the server (sylk.api.>); with none, the factory has started
// an embedded broker for the command, and the command opens the projections
// store itself and catches up from the stream. Both answer through
// projections.Reader, so both modes print the same thing.
type stateReader struct {
	projections.Reader
	store  *projections.Store // local mode
	client *api.Client        // server mode
	log    *events.Log
}

// State returns the reader for this command, caught up with the stream.
func (f *Factory) State(ctx context.Context) (*stateReader, error) {
	return f.state(ctx, true)
}

func (f *Factory) state(ctx context.Context, catchUp bool) (*stateReader, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	r := &stateReader{log: events.New(b.JetStream())}
	if !b.Embedded() {
		c := api.NewClient(b.Conn())
		err := c.Ping(ctx)
		if err == nil {
			r.Reader, r.client = c, c
			return r, nil
		}
		if !errors.Is(err, api.ErrNoServer) {
			return nil, err
		}
		// An external NATS with no sylk server on it: read the local store.
	}
	store, err := projections.Open(ctx, projections.Options{Dir: ProjectionsDir(f.BrokerOptions().DataDir), Logger: slog.Default()})
	if err != nil {
		return nil, err
	}
	r.Reader, r.store = store, store
	if catchUp {
		if err := r.catchUp(ctx, f.IO); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// catchUp folds what the stream holds into the local store, showing progress
// on a terminal when that takes a while.
func (r *stateReader) catchUp(ctx context.Context, io *IOStreams) error {
	p := r.store.Projector(r.log)
	last, err := r.log.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !io.Terminal || last-r.store.Cursor() < 50_000 {
		_, err := p.CatchUp(ctx)
		return err
	}
	fmt.Fprintf(io.ErrOut, "catching up the projections with %d events (sylk serve keeps them current)\n", last-r.store.Cursor())
	_, err = p.CatchUp(ctx)
	return err
}

// Sync makes the reader's answers reflect stream sequence seq (an append of
// this command).
func (r *stateReader) Sync(ctx context.Context, seq uint64) error {
	if r.client != nil {
		r.client.MinSeq = max(r.client.MinSeq, seq)
		return r.client.WaitFor(ctx, seq)
	}
	if _, err := r.store.Projector(r.log).CatchUp(ctx); err != nil {
		return err
	}
	return r.store.WaitFor(ctx, seq)
}

// Rejected returns why the projections refused the event at seq, if they did.
func (r *stateReader) Rejected(ctx context.Context, seq uint64) (*projections.Rejection, error) {
	rs, err := r.Rejections(ctx, projections.RejectionFilter{Seq: seq})
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// Verify rebuilds in memory and compares, on the server or locally.
func (r *stateReader) Verify(ctx context.Context) (*projections.VerifyReport, error) {
	if r.client != nil {
		return r.client.Verify(ctx)
	}
	return r.store.Verify(ctx, r.log)
}

// Close closes a local store.
func (r *stateReader) Close() {
	if r.store != nil {
		if err := r.store.Close(); err != nil {
			slog.Warn("closing the projections store", "err", err)
		}
		r.store = nil
	}
}

// progressBar is a progress bar on a terminal's stderr, or nothing.
func progressBar(io *IOStreams, total int64, what string) *progressbar.ProgressBar {
	if !io.Terminal {
		return nil
	}
	return progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(io.ErrOut),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("events"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionEnableColorCodes(io.Color),
		progressbar.OptionClearOnFinish(),
	)
}
