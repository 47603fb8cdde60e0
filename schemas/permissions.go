package schemas

// Permission types: a tool action outside an agent's allow-list that the
// user is asked about, and the user's answer (seed L12204-12423).
const (
	TypePermissionRequest  Type = "permission_request"
	TypePermissionDecision Type = "permission_decision"
)

var permissionTypes = map[Type]typeInfo{
	TypePermissionRequest:  entry[PermissionRequest]("An agent's tool action outside its allow-list that waits for the user's decision."),
	TypePermissionDecision: entry[PermissionDecision]("The user's answer to a permission request: allow or deny, once, for the session or always."),
}

// Permission actions: what a request asks to do.
const (
	// ActionCommand is running a command (the exec tool).
	ActionCommand = "command"
)

// Permission decisions and their scopes.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"

	// PermitOnce answers this request only.
	PermitOnce = "once"
	// PermitSession answers every request of the session for the same grant.
	PermitSession = "session"
	// PermitAlways answers every request for the same grant in any session:
	// the project allow-list.
	PermitAlways = "always"
)

// PermissionRequest asks the user whether Agent may do Target. Its envelope
// id is the request's id. Grant is what an answer for the session or always
// covers: the base command, as the seed's allow-list keeps it (L12308-12323).
type PermissionRequest struct {
	Agent   string `json:"agent"`
	Tool    string `json:"tool"`
	Action  string `json:"action"`
	Target  string `json:"target"`
	Grant   string `json:"grant"`
	Reason  string `json:"reason"`
	CallID  string `json:"call_id"`
	DAGID   string `json:"dag_id,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// PermissionDecision answers the permission request RequestID.
type PermissionDecision struct {
	RequestID string `json:"request_id"`
	Decision  string `json:"decision"`
	Scope     string `json:"scope"`
	Reason    string `json:"reason,omitempty"`
}
