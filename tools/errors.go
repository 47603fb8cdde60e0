package tools

import "errors"

// Sentinel errors returned by [Executor.Run] and the constructors. They are
// always wrapped with the identifying value (tool, agent, field, path); test
// for them with errors.Is.
//
// A refusal (unknown tool, permission denied, invalid call or arguments, path
// escape) is permanent: the same call will be refused again, so the caller
// should not retry it. A command that runs and fails is not an error: it is a
// [Result] with OK == false.
var (
	// ErrUnknownTool: the call names no built-in tool. Names are matched
	// exactly; an unknown name is never treated as a read.
	ErrUnknownTool = errors.New("tools: unknown tool")

	// ErrPermissionDenied: the agent's policy does not allow the tool (or,
	// for exec, the command).
	ErrPermissionDenied = errors.New("tools: permission denied")

	// ErrInvalidCall: the call itself is malformed (bad call id).
	ErrInvalidCall = errors.New("tools: invalid call")

	// ErrInvalidArgs: the arguments do not match the tool's schema or break
	// one of its rules. The message names the field and what was expected.
	ErrInvalidArgs = errors.New("tools: invalid arguments")

	// ErrPathEscape: a path resolves outside the work directory (through
	// "..", an absolute path or a symbolic link). Errors wrapping it also
	// wrap ErrInvalidArgs.
	ErrPathEscape = errors.New("tools: path escapes the work directory")

	// ErrInvalidOptions: Options or Policy failed validation.
	ErrInvalidOptions = errors.New("tools: invalid options")
)

// IsRefusal reports whether err is a refusal by Run (unknown tool,
// permission denied, invalid call or arguments, path escape): permanent, not
// worth a retry. An interrupted call (context ended) is not a refusal.
func IsRefusal(err error) bool {
	for _, s := range []error{ErrUnknownTool, ErrPermissionDenied, ErrInvalidCall, ErrInvalidArgs, ErrPathEscape} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
