// Package llm is Sylk's LLM tier: one Client per process that makes every
// LLM call of the agents against an OpenAI-compatible endpoint (OpenAI,
// Ollama, vLLM, a llama.cpp server, OpenRouter) through go-openai, and
// records each call in the event log so that no message handled twice ever
// calls twice.
//
// # Calls are side effects recorded before the ack
//
// Client.Complete works like agents.Delivery.RunTool. A call has a
// deterministic id (CallID: the message, the agent and the caller's key for
// the call). If its llm_response is recorded, Complete returns it at once:
// no request, no cost, no budget. Otherwise it checks the budgets, appends an
// llm_request event (the "started" record: model, messages digest and the
// messages new since the conversation's previous call, tools offered, the
// estimate and the budget check), makes the call, and appends the
// llm_response and llm_usage events in one atomic batch before it returns,
// so before the runner acks. A replayed or redelivered session therefore
// never reaches the endpoint for a call already answered; a call cut off by
// a crash shows in the log as an llm_request with no response, and is made
// again.
//
// # The gate
//
// Calls go through the seed's request gate (seed L3027-4421), in this order:
//
//   - Budgets (Config.Budgets): global, per session and per task (DAG node)
//     limits in tokens, checked against what the usage records say was spent
//     (Usage; Ledger folds the llm_usage events) plus what calls in flight
//     reserved. A call that would pass a limit is refused before anything is
//     recorded, with an error wrapping ErrBudgetExceeded.
//   - A priority queue: at most Config.Concurrency calls in flight; the others
//     wait, user-interactive work first, then planning, execution,
//     validation and background work (PriorityOf), first come first served
//     within a priority.
//   - Rate limits: a 429 pauses the whole gate until its Retry-After (or an
//     exponential backoff from one second to five minutes), appends a signal
//     pausing every session with the time it ends, and appends the resume
//     when it is over (see ResumeStalePause for a process that stopped in
//     between).
//   - Retries per error class: 5xx, 408, network errors, timeouts, stalled
//     streams and malformed or empty answers are retried with backoff
//     (Config.Retries), then handed back to the runner as transient (the
//     redelivery reuses every call recorded so far); any other 4xx is a
//     refusal, recorded like an answer and never retried (ErrRefused). The
//     runner's "llm" circuit breaker sees every attempt.
//
// # Streaming
//
// Unless Config.NoStream, answers are streamed: each piece is published as a
// stream_chunk envelope on sylk.live.<session>.<correlation> (core NATS, not
// stored) for `sylk tail --live` and the run view, and the complete answer is
// the stored llm_response. A stream silent for Config.IdleTimeout is cut off
// and retried.
//
// # Context windows
//
// Client.Fit shrinks a conversation that outgrows the model's window without
// dropping anything silently: the middle of the conversation is handed to the
// Archivalist and replaced by a summary the model writes (or, failing that, a
// note saying what was left out and where it is).
package llm
