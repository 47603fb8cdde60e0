package schemas

// TypeHookDecision records what the hooks decided at one point of an agent's
// work (before or after a message, an LLM call or a tool call), under a
// deterministic call id: a redelivery, replay or re-execution finds it and
// applies it again without running a hook, so a hook program runs once.
const TypeHookDecision Type = "hook_decision"

// hookTypes are the hook pipeline's types.
var hookTypes = map[Type]typeInfo{
	TypeHookDecision: entry[HookDecision]("What the hooks decided at one point of an agent's work (recorded once, reused on redelivery)."),
}

// HookDecision is the combined outcome of the hooks of one point invocation,
// and what each hook that mattered said. It is recorded when a hook program
// ran or a hook changed something (blocked, answered, changed the arguments,
// added context, redacted, failed, returned events); hooks that all let the
// call go on unchanged leave no record.
type HookDecision struct {
	CallID string `json:"call_id"`
	// Point is pre_message, post_message, pre_prompt, post_prompt, pre_tool
	// or post_tool.
	Point string `json:"point"`
	Agent string `json:"agent"`
	// Tool is the tool of a tool point.
	Tool string `json:"tool,omitempty"`
	// Action is the outcome: continue, block or answer.
	Action string `json:"action"`
	// Reason is why a hook blocked: what the model (or the user) sees.
	Reason string `json:"reason,omitempty"`
	// By names the hook that blocked or answered.
	By string `json:"by,omitempty"`
	// Context is the text the hooks added (to the system prompt, the tool
	// result or the message's outcome).
	Context string `json:"context,omitempty"`
	// Args are the tool arguments after the hooks changed them, as JSON.
	Args string `json:"args,omitempty"`
	// Answer replaces the call: a tool result's text or the model's answer.
	Answer string `json:"answer,omitempty"`
	// Text is the result or answer text the model sees after redaction,
	// when a hook redacted it.
	Text string `json:"text,omitempty"`
	// Redacted says a hook redacted the text.
	Redacted bool `json:"redacted,omitempty"`
	// Hooks lists what each hook that ran said, in order.
	Hooks []HookVerdict `json:"hooks,omitempty"`
	// Events are the events the hooks returned, appended with the agent's
	// outputs; a reused decision appends them again under the same ids.
	Events []HookEvent `json:"events,omitempty"`
}

// HookVerdict is one hook's part of a decision.
type HookVerdict struct {
	Hook string `json:"hook"`
	// Source is builtin or config.
	Source   string `json:"source"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Failed is why the hook failed (crashed, timed out, printed garbage,
	// returned an unknown decision); FailMode says what that meant: open
	// (the call went on) or closed (it was blocked).
	Failed     string `json:"failed,omitempty"`
	FailMode   string `json:"fail_mode,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// HookEvent is an event a hook returned: its type, addressee, the key its id
// is derived under, and its payload (msgpack).
type HookEvent struct {
	Type    Type   `json:"type"`
	Target  string `json:"target"`
	Key     string `json:"key"`
	Payload []byte `json:"payload"`
}
