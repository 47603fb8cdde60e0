// Package broker runs Sylk's message broker: an embedded nats-server with
// JetStream on a data directory, or a connection to an external NATS server, and
// the idempotent provisioning of the SYLK and SYLK_DLQ streams.
//
// One embedded server owns a data directory at a time. It holds an exclusive lock
// on <data>/sylk.lock for its whole life and publishes how to reach it in
// <data>/server.json, so other sylk commands and outside NATS clients find it.
package broker
