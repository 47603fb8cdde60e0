package main

import (
	"context"
	"log/slog"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/projections/api"
)

// serveAPI answers projection queries on sylk.api.> until ctx ends.
func serveAPI(ctx context.Context, b *broker.Broker, store *projections.Store) error {
	svc, err := api.Serve(ctx, b.Conn(), store, events.New(b.JetStream()), slog.Default())
	if err != nil {
		return err
	}
	<-ctx.Done()
	return svc.Stop()
}
