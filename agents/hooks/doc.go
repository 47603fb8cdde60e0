// Package hooks is the hook pipeline: code that runs at fixed points of an
// agent's work and may change what happens there, every decision that
// matters recorded as an event.
//
// # Points
//
//	pre_message, post_message   around the runner's handling of a message
//	pre_prompt, post_prompt     around an LLM call of an agent loop
//	pre_tool, post_tool         around a tool call of an agent loop
//
// The hooks of a point run in order of priority (first 0, early 25, normal
// 50, late 75, last 100; lower first), ties in registration order (built-in
// hooks before the configuration's, which keep their order in the file). A
// hook can be limited to some agents, and a tool point's hook to some tools
// (its trigger).
//
// # Decisions
//
// A hook answers continue, block or answer, and may add context, change the
// arguments, or redact:
//
//	continue   the call goes on (the default)
//	block      pre_tool: the tool does not run; the model is shown "blocked by
//	           hook NAME: REASON" as the tool's (failed) result.
//	           post_tool: the model is shown that instead of the result.
//	           pre_prompt, post_prompt: the task ends with the reason.
//	           pre_message: the handler is not called; the hook's events (a
//	           reroute_request) are appended instead.
//	answer     pre_tool, pre_prompt: the call is not made; the answer is the
//	           tool's result or the model's answer (a cache).
//	context    added to the system prompt (pre_prompt), to the tool result's
//	           text (pre_tool, post_tool) or to the answer (post_prompt).
//	args       pre_tool: replace the tool's arguments.
//	redact     post_tool, post_prompt: strings removed from what the model sees.
//
// The first block or answer ends the point: later hooks do not run. A hook
// has no side effect of its own: in-process hooks return events, which the
// runner appends with the agent's outputs before the ack.
//
// # Recorded once
//
// When a hook program ran, or any hook changed something (blocked, answered,
// changed arguments, added context, redacted, failed, returned events), the
// combined decision is appended as a hook_decision event under a
// deterministic call id (the message, the agent, the point and the call)
// before the call it governs is made. A redelivery, replay or re-execution
// finds it and applies it again without running any hook: a hook program
// runs once per call, like a tool. Points where every hook let the call go
// on unchanged leave no record and cost no append.
//
// # User hooks
//
// The configuration's `hooks:` list declares programs ([Config]): a point, a
// trigger, agents, a priority, the command, a timeout and whether a failure
// fails open or closed. Each runs through the tools layer
// ([tools.Executor.RunProgram]: its own process group, killed at its
// timeout, bounded output, the scrubbed environment), in the project
// directory, with the point's data as JSON on stdin:
//
//	{"hook": "no-rm", "point": "pre_tool", "agent": "engineer", "session": "s-1",
//	 "message": {"id": "...", "type": "task_dispatch", "source": "orchestrator", "payload": {...}},
//	 "tool": "exec", "args": {"argv": ["rm", "-rf", "build"]}, "dag_id": "d1", "node_id": "n1"}
//
// (post_tool adds "result" and "text", pre_prompt "messages", post_prompt
// "response" and "text", post_message "outputs") and prints its decision on
// stdout:
//
//	{"decision": "block", "reason": "rm is not allowed; use git clean -n to see what would go"}
//	{"decision": "continue", "context": "the build directory is generated"}
//	{"decision": "continue", "args": {"argv": ["rm", "-ri", "build"]}}
//	{"decision": "answer", "answer": "cached: 42 tests pass"}
//	{"decision": "continue", "redact": ["internal.example.com"]}
//	{"decision": "continue", "events": [{"type": "history_entry", "target": "archivalist",
//	  "payload": {"category": "decision", "summary": "exec ran under review"}}]}
//
// Events (at most [MaxProgramEvents]) are a hook program's only side effect:
// each must have a type of the message catalogue that records no call (not
// tool_result, llm_response, skills_selected, hook_decision, ...), an agent
// or "user" (the default) as target, and a payload that satisfies the type's
// published JSON Schema with no unknown field ([schemas.DecodePayloadJSON]);
// otherwise the hook has failed, naming the event and the field. They are
// recorded in the hook_decision and appended with the agent's outputs under
// ids derived from it, so a redelivery appends the same events again.
//
// Empty output continues. A program that cannot start, exits non-zero,
// crashes, is killed at its timeout, prints anything but one decision
// object (unknown keys included) or an unknown decision fails: the failure
// is recorded with its reason, and the hook's fail mode decides what it
// means: open (the default) lets the call go on, closed blocks it with the
// failure as the reason. A failed hook never stops the agent.
//
// # Built-in hooks
//
// [Builtins]: step0 (pre_message, first: work outside the agent's domain goes
// back to the Guide as a reroute_request), permission_check and
// git_permissions (pre_tool, first: the tool allow-list and the seed's git
// permission matrix, [GitMatrix], which also looks into exec of git),
// session_context (pre_prompt, first), token_budget (pre_prompt, late; the
// LLM tier's budgets) and redact_secrets (post_tool and post_prompt, last;
// the tools layer's redactor).
package hooks
