// Package events is the event log API over the SYLK stream: the subject scheme,
// Append (validated, deduplicated by envelope id, atomic batches), Read of a range
// and Tail of live events from a cursor.
//
// Every event is published on
//
//	sylk.v1.<session>.<source>.<target>.<type>
//
// with the envelope's msgpack encoding as the body and headers that let outside
// consumers filter without decoding: Nats-Msg-Id (the envelope id), Sylk-Schema,
// Sylk-Session, Sylk-Type, Sylk-Source, Sylk-Target, Sylk-Correlation and
// Content-Type: application/msgpack.
package events
