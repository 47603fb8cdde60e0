package broker

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// AgentKinds are the agent kinds Sylk runs, each with its durable consumer
// agent-<kind>. An observer may not read, create or delete these consumers: a
// fetch from one would take work away from the agent.
var AgentKinds = []string{
	"guide", "architect", "orchestrator", "engineer", "inspector", "tester",
	"librarian", "archivalist", "academic", "pipeline",
}

// Role kinds.
const (
	RoleAdmin    = "admin"
	RoleObserver = "observer"
	RoleAgent    = "agent"
	RoleConsumer = "consumer"
)

// ErrInvalidRole is wrapped by ParseRole failures.
var ErrInvalidRole = errors.New("invalid role")

// Role is what a credential may do on the server. Its NATS permissions
// (Permissions) deny everything not listed.
//
//   - admin: everything, except deleting or purging the SYLK stream (which the
//     stream refuses anyway).
//   - observer: read every event (subscribe to sylk.v1.>, create, read and
//     delete its own consumers on SYLK, direct gets), ask the read-only
//     queries of sylk.api; no publishing into sylk.v1.>, no stream
//     administration, no access to the agents' consumers.
//   - agent:<kind>: what an observer may, plus publishing events whose source
//     is <kind> (sylk.v1.*.<kind>.>; the Guide, which routes everyone's
//     messages unchanged, any source), reading and acking its own durable
//     consumer agent-<kind>, dead-lettering to sylk.dlq.agent-<kind> and
//     streaming LLM tokens on sylk.live.>.
//   - consumer:<name>: read one existing durable consumer of SYLK and ack its
//     messages; nothing else.
type Role struct {
	Kind string // RoleAdmin, RoleObserver, RoleAgent, RoleConsumer
	Name string // the agent kind or the consumer name
}

var consumerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseRole reads "admin", "observer", "agent:<kind>" or "consumer:<name>".
func ParseRole(s string) (Role, error) {
	kind, name, _ := strings.Cut(s, ":")
	switch kind {
	case RoleAdmin, RoleObserver:
		if name == "" {
			return Role{Kind: kind}, nil
		}
	case RoleAgent:
		if slices.Contains(AgentKinds, name) {
			return Role{Kind: kind, Name: name}, nil
		}
		return Role{}, fmt.Errorf("%w: %q: the agent kind must be one of %s", ErrInvalidRole, s, strings.Join(AgentKinds, ", "))
	case RoleConsumer:
		if consumerName.MatchString(name) && !isAgentConsumer(name) {
			return Role{Kind: kind, Name: name}, nil
		}
		return Role{}, fmt.Errorf("%w: %q: want consumer:<name>, a consumer name of [A-Za-z0-9_-] that is not an agent's", ErrInvalidRole, s)
	}
	return Role{}, fmt.Errorf("%w: %q: want admin, observer, agent:<kind> (%s) or consumer:<name>", ErrInvalidRole, s, strings.Join(AgentKinds, ", "))
}

func (r Role) String() string {
	if r.Name == "" {
		return r.Kind
	}
	return r.Kind + ":" + r.Name
}

func isAgentConsumer(name string) bool {
	k, ok := strings.CutPrefix(name, "agent-")
	return ok && slices.Contains(AgentKinds, k)
}

// Subjects of the JetStream API on the SYLK stream.
const (
	jsAPI       = "$JS.API."
	jsConsumer  = jsAPI + "CONSUMER."
	jsAck       = "$JS.ACK." + Stream + "."
	jsFlowCtl   = "$JS.FC." + Stream + ".>"
	inboxes     = "_INBOX.>"
	apiSubjects = "sylk.api"
)

// readOnlyAPI are the sylk.api queries that change nothing.
var readOnlyAPI = []string{
	apiSubjects + ".*.get", apiSubjects + ".*.list", apiSubjects + ".replay", apiSubjects + ".replay.state",
	apiSubjects + ".call.*", apiSubjects + ".wait", apiSubjects + ".projections.status",
}

// consumerSubjects are the API subjects that act on consumer name of SYLK.
func consumerSubjects(name string, create bool) []string {
	s := []string{
		jsConsumer + "INFO." + Stream + "." + name,
		jsConsumer + "MSG.NEXT." + Stream + "." + name,
		jsAck + name + ".>",
	}
	if create {
		s = append(s,
			jsConsumer+"CREATE."+Stream+"."+name,
			jsConsumer+"CREATE."+Stream+"."+name+".>",
			jsConsumer+"DURABLE.CREATE."+Stream+"."+name,
			jsConsumer+"DELETE."+Stream+"."+name,
		)
	}
	return s
}

// Permissions are the NATS permissions of r: deny by default, the role's
// subjects allowed.
func (r Role) Permissions() jwt.Permissions {
	var p jwt.Permissions
	// Nobody deletes or purges the event log; the stream refuses it too.
	p.Pub.Deny.Add(jsAPI+"STREAM.DELETE."+Stream, jsAPI+"STREAM.PURGE."+Stream, jsAPI+"STREAM.MSG.DELETE."+Stream)
	switch r.Kind {
	case RoleAdmin:
		p.Pub.Allow.Add(">")
		p.Sub.Allow.Add(">")
		return p
	case RoleConsumer:
		p.Pub.Allow.Add(jsAPI+"INFO", jsAPI+"STREAM.INFO."+Stream, jsFlowCtl)
		p.Pub.Allow.Add(consumerSubjects(r.Name, false)...)
		p.Sub.Allow.Add(inboxes)
		return p
	}
	// Observer, and the reading part of an agent.
	p.Pub.Allow.Add(
		jsAPI+"INFO", jsAPI+"STREAM.NAMES", jsAPI+"STREAM.INFO."+Stream,
		jsAPI+"DIRECT.GET."+Stream, jsAPI+"DIRECT.GET."+Stream+".>", jsAPI+"STREAM.MSG.GET."+Stream,
		jsConsumer+"NAMES."+Stream, jsConsumer+"LIST."+Stream, jsConsumer+"CREATE."+Stream,
		jsFlowCtl,
	)
	p.Pub.Allow.Add(consumerSubjects("*", true)...)
	p.Pub.Allow.Add(readOnlyAPI...)
	p.Sub.Allow.Add(StreamSubjects, inboxes, "sylk.live.>")
	own := ""
	if r.Kind == RoleAgent {
		own = "agent-" + r.Name
	}
	for _, k := range AgentKinds {
		if c := "agent-" + k; c != own {
			p.Pub.Deny.Add(consumerSubjects(c, true)...)
		}
	}
	if r.Kind != RoleAgent {
		p.Pub.Deny.Add(StreamSubjects)
		return p
	}
	if r.Name == "guide" {
		p.Pub.Allow.Add(StreamSubjects) // routed copies keep their sender
	} else {
		p.Pub.Allow.Add("sylk.v1.*." + r.Name + ".>")
	}
	p.Pub.Allow.Add("sylk.dlq."+own, jsAPI+"STREAM.INFO."+DLQStream, "sylk.live.>")
	p.Sub.Allow.Add("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + Stream + "." + own)
	return p
}
