// Package schemas is Sylk's wire contract: the [Envelope] every event travels in,
// the catalogue of message types with one payload struct per type, the msgpack
// codec, validation, and the JSON Schema documents published for outside consumers.
//
// The body of every NATS message on the SYLK stream is the msgpack encoding of an
// Envelope as a map keyed by the seed's JSON names (id, session_id, type, source,
// timestamp, ...). The payload is embedded in that map as the msgpack encoding of the
// payload struct registered for the type, also with snake_case keys, so any msgpack
// library can read an event without Sylk's code.
//
// schemas knows nothing of NATS or storage; it imports the standard library and
// msgpack only.
package schemas
