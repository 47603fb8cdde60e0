package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sylk/sylk/cmd/sylk/internal/server"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
	"github.com/sylk/sylk/schemas"
)

// StateReader is where a command reads projected state. With `sylk serve`
// running it asks the server (sylk.api.>); with none, the factory has started
// an embedded broker for the command, and the command opens the projections
// store itself and catches up from the stream. Both answer through
// projections.Reader, so both modes print the same thing.
type StateReader struct {
	projections.Reader
	// Store is the local store (local mode), Client the server's API (server
	// mode): one of them is set.
	Store  *projections.Store
	Client *api.Client
	// Log is the event log the state is read from.
	Log *events.Log
}

// State returns the reader for this command, caught up with the stream.
func (f *Factory) State(ctx context.Context) (*StateReader, error) {
	return f.OpenState(ctx, true)
}

// OpenState returns the reader for this command, caught up with the stream
// if catchUp: in both modes its answers then reflect every event the stream
// held when it was opened, so a command reads what was appended just before
// it ran (by itself, another command or an outside client), not a
// projector's trailing batch.
func (f *Factory) OpenState(ctx context.Context, catchUp bool) (*StateReader, error) {
	return f.OpenStateWith(ctx, catchUp, projections.Options{})
}

// OpenStateWith is OpenState with a local store opened with opts (its
// directory and logger are the factory's).
func (f *Factory) OpenStateWith(ctx context.Context, catchUp bool, opts projections.Options) (*StateReader, error) {
	b, err := f.Broker(ctx)
	if err != nil {
		return nil, err
	}
	r := &StateReader{Log: events.New(b.JetStream())}
	if !b.Embedded() {
		c := api.NewClient(b.Conn())
		err := c.Ping(ctx)
		if err == nil {
			r.Reader, r.Client = c, c
			if catchUp {
				if err := r.Current(ctx); err != nil {
					return nil, err
				}
			}
			return r, nil
		}
		if !errors.Is(err, api.ErrNoServer) {
			return nil, err
		}
		// An external NATS with no sylk server on it: read the local store.
	}
	opts.Dir, opts.Logger = server.ProjectionsDir(f.BrokerOptions().DataDir), slog.Default()
	store, err := projections.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	r.Reader, r.Store = store, store
	// The store reads through its projector's source what it left in the
	// stream (a session log's big index payloads), caught up or not.
	store.Projector(r.Log)
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
func (r *StateReader) catchUp(ctx context.Context, io *IOStreams) error {
	p := r.Store.Projector(r.Log)
	last, err := r.Log.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !io.Terminal || last-r.Store.Cursor() < 50_000 {
		_, err := p.CatchUp(ctx)
		return err
	}
	fmt.Fprintf(io.ErrOut, "catching up the projections with %d events (sylk serve keeps them current)\n", last-r.Store.Cursor())
	_, err = p.CatchUp(ctx)
	return err
}

// Current waits until a server's projections have applied everything the
// stream held when called: its projector may trail the stream by a batch. A
// local store is caught up already.
func (r *StateReader) Current(ctx context.Context) error {
	if r.Client == nil {
		return nil
	}
	last, err := r.Log.LastSeq(ctx)
	if err != nil {
		return err
	}
	return r.Sync(ctx, last)
}

// Sync makes the reader's answers reflect stream sequence seq (an append of
// this command).
func (r *StateReader) Sync(ctx context.Context, seq uint64) error {
	if r.Client != nil {
		r.Client.MinSeq = max(r.Client.MinSeq, seq)
		return r.Client.WaitFor(ctx, seq)
	}
	if _, err := r.Store.Projector(r.Log).CatchUp(ctx); err != nil {
		return err
	}
	return r.Store.WaitFor(ctx, seq)
}

// Rejected returns why the projections refused the event at seq, if they did.
func (r *StateReader) Rejected(ctx context.Context, seq uint64) (*projections.Rejection, error) {
	rs, err := r.Rejections(ctx, projections.RejectionFilter{Seq: seq})
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// AppendApplied appends env, waits until the projections have applied it,
// and returns a projection's refusal of it as an error that says why.
func (r *StateReader) AppendApplied(ctx context.Context, env *schemas.Envelope) (uint64, error) {
	seq, err := r.Log.Append(ctx, env)
	if err != nil {
		return 0, err
	}
	if err := r.Sync(ctx, seq); err != nil {
		return 0, err
	}
	if rej, err := r.Rejected(ctx, seq); err != nil {
		return 0, err
	} else if rej != nil {
		return 0, fmt.Errorf("the %s was refused: %s", env.Type, rej.Reason)
	}
	return seq, nil
}

// Verify rebuilds in memory and compares, on the server or locally.
func (r *StateReader) Verify(ctx context.Context) (*projections.VerifyReport, error) {
	if r.Client != nil {
		return r.Client.Verify(ctx)
	}
	return r.Store.Verify(ctx, r.Log)
}

// Close closes a local store.
func (r *StateReader) Close() {
	if r.Store != nil {
		if err := r.Store.Close(); err != nil {
			slog.Warn("closing the projections store", "err", err)
		}
		r.Store = nil
	}
}

// SessionNotFound words the error for an unknown session id.
func SessionNotFound(id string, err error) error {
	if errors.Is(err, projections.ErrNotFound) {
		return fmt.Errorf("%w ('sylk session list' shows the sessions)", err)
	}
	return err
}
