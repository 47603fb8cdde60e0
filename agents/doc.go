// Package agents runs Sylk's agents as durable consumers of the event log.
//
// Each agent kind has one durable pull consumer, agent-<name>, filtered to the
// events addressed to it; any number of processes may run a Runner for the same
// kind and share the work. For each message a Runner decodes the envelope (bytes
// that are not one go to the dead-letter stream), holds it while its session is
// paused, runs the hook chain and the handler, appends the events the handler
// returns, and only then acks.
//
// Side effects are recorded before the ack. A handler runs tools through
// [Delivery.RunTool], which appends a tool_call event before the tool starts and
// a tool_result event after it ends, keyed by a deterministic call id; a
// redelivered message finds the recorded result and reuses it, so a tool whose
// result is recorded never runs twice. Only a call cut off by a crash runs again,
// and the stream shows that attempt as a tool_call with no result. Events a
// handler derives carry deterministic ids (schemas.DeriveID), so appending them
// again after a redelivery is a no-op.
//
// Errors: a Transient error is retried with NakWithDelay and backoff, a
// Permanent one (and anything after MaxDeliver deliveries) is terminated and
// dead-lettered with the reason. Nothing is dropped silently.
package agents
