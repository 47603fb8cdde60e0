package projections_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// base is the timestamp of the first event a test appends; each further event
// is one second later, so golden output is stable.
var base = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

// world is a real broker, its event log and a projections store on an
// in-memory filesystem.
type world struct {
	t     testing.TB
	ctx   context.Context
	log   *events.Log
	js    jetstream.JetStream
	fs    vfs.FS
	store *projections.Store
	n     int // events built so far
}

func newWorld(t testing.TB) *world {
	b := brokertest.Start(t, brokertest.Options(t))
	w := &world{t: t, ctx: brokertest.Context(t), log: events.New(b.JetStream()), js: b.JetStream(), fs: vfs.NewMem()}
	w.open()
	t.Cleanup(func() {
		if w.store != nil {
			w.store.Close()
		}
	})
	return w
}

// follow runs p in the background until stop is called or the test ends, and
// stop returns what Run returned. The store is closed only after Run has
// returned, however the test ends (a projector folding into a closed store
// would panic and take the whole package down with it).
func (w *world) follow(p *projections.Projector) (stop func() error) {
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	w.t.Cleanup(func() { stop() })
	return stop
}

func (w *world) open() {
	s, err := projections.Open(w.ctx, projections.Options{Dir: "/proj", FS: w.fs})
	if err != nil {
		w.t.Fatalf("open store: %v", err)
	}
	w.store = s
}

func (w *world) restart() {
	if err := w.store.Close(); err != nil {
		w.t.Fatalf("close store: %v", err)
	}
	w.open()
	w.catchUp()
}

func (w *world) catchUp() uint64 {
	seq, err := w.store.Projector(w.log).CatchUp(w.ctx)
	if err != nil {
		w.t.Fatalf("catch up: %v", err)
	}
	return seq
}

// envOpts are the envelope fields a line may set; everything else of the form
// key=value goes into the payload.
// (at=N stamps the event N seconds after base instead of one second after the
// previous one.)
var envOpts = map[string]bool{"source": true, "target": true, "corr": true, "parent": true, "id": true, "chain": true, "reroutes": true, "intent": true, "at": true}

// payloadFields maps shorthand keys to payload fields.
var payloadFields = map[string]string{
	"dag": "dag_id", "node": "node_id", "call": "call_id", "plan": "plan_id", "reply": "in_reply_to",
}

// parseEvent reads one line: SESSION TYPE [key=value ...] [JSON payload].
// dag_execute and plan_response take dag=ID nodes=a;b:a;c:a,b (id:deps).
func (w *world) parseEvent(line string) (*schemas.Envelope, error) {
	var jsonPart string
	if i := strings.IndexByte(line, '{'); i >= 0 {
		line, jsonPart = line[:i], line[i:]
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil, fmt.Errorf("want SESSION TYPE [k=v ...] [JSON]: %q", line)
	}
	t := schemas.Type(f[1])
	payload := map[string]any{}
	if jsonPart != "" {
		if err := json.Unmarshal([]byte(jsonPart), &payload); err != nil {
			return nil, fmt.Errorf("payload %s: %w", jsonPart, err)
		}
	}
	opts := map[string]string{}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("option %q: want key=value", kv)
		}
		if envOpts[k] {
			opts[k] = v
			continue
		}
		if t == schemas.TypeDAGExecute || t == schemas.TypePlanResponse {
			if k == "dag" || k == "nodes" {
				d, _ := payload["dag"].(map[string]any)
				if d == nil {
					d = map[string]any{}
					payload["dag"] = d
				}
				if k == "dag" {
					d["id"] = v
				} else {
					d["nodes"] = parseNodes(v)
				}
				continue
			}
		}
		if pf, ok := payloadFields[k]; ok {
			k = pf
		}
		payload[k] = scalar(v)
	}
	raw, _ := json.Marshal(payload)
	p, err := schemas.NewPayload(t)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("payload for %s: %w", t, err)
	}
	w.n++
	source := opts["source"]
	if source == "" {
		source = "user"
	}
	ts := base.Add(time.Duration(w.n) * time.Second)
	if v := opts["at"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("at=%s: want seconds after base", v)
		}
		ts = base.Add(time.Duration(n) * time.Second)
	}
	env, err := schemas.New(t, f[0], source, opts["target"], ts, p)
	if err != nil {
		return nil, err
	}
	env.ID = fmt.Sprintf("e%04d", w.n)
	env.CorrelationID = env.ID
	if v := opts["id"]; v != "" {
		env.ID = v
	}
	if v := opts["corr"]; v != "" {
		env.CorrelationID = v
	}
	env.ParentID = opts["parent"]
	if v := opts["chain"]; v != "" {
		for _, c := range strings.Split(v, ",") {
			agent, conf, _ := strings.Cut(c, ":")
			x, _ := strconv.ParseFloat(conf, 64)
			env.ConfidenceChain = append(env.ConfidenceChain, schemas.ConfidenceEntry{Agent: agent, Confidence: x})
		}
	}
	if v := opts["reroutes"]; v != "" {
		for _, r := range strings.Split(v, ",") {
			from, to, _ := strings.Cut(r, ">")
			env.RerouteHistory = append(env.RerouteHistory, schemas.RerouteHop{From: from, To: to, Reason: "not my domain"})
		}
	}
	if v := opts["intent"]; v != "" {
		env.StructuredIntent = &schemas.StructuredIntent{OriginalRequest: v}
	}
	return env, schemas.Validate(env)
}

func parseNodes(spec string) []any {
	var out []any
	for _, n := range strings.Split(spec, ";") {
		id, deps, _ := strings.Cut(n, ":")
		node := map[string]any{"id": id, "agent": "engineer", "tool": "exec"}
		if deps != "" {
			var d []any
			for _, x := range strings.Split(deps, ",") {
				d = append(d, x)
			}
			node["depends_on"] = d
		}
		out = append(out, node)
	}
	return out
}

func scalar(v string) any {
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	if v == "true" || v == "false" {
		return v == "true"
	}
	return v
}

// appendLines appends one event per line, folds them and reports each event's
// sequence and any rejection.
func (w *world) appendLines(input string) string {
	var out strings.Builder
	var seqs []uint64
	var envs []*schemas.Envelope
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		env, err := w.parseEvent(line)
		if err != nil {
			return "error: " + err.Error()
		}
		seq, err := w.log.Append(w.ctx, env)
		if err != nil {
			return "error: " + err.Error()
		}
		seqs, envs = append(seqs, seq), append(envs, env)
	}
	w.catchUp()
	for i, seq := range seqs {
		fmt.Fprintf(&out, "%d %s %s", seq, envs[i].SessionID, envs[i].Type)
		rs, err := w.store.Rejections(w.ctx, projections.RejectionFilter{Seq: seq})
		if err != nil {
			return "error: " + err.Error()
		}
		for _, r := range rs {
			fmt.Fprintf(&out, "\n  rejected by %s: %s", r.Projection, r.Reason)
		}
		out.WriteString("\n")
	}
	return out.String()
}

func formatTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format("15:04:05")
}

func formatSession(s *projections.Session) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.ID, s.State)
	if s.Name != "" {
		fmt.Fprintf(&b, " name=%q", s.Name)
	}
	if s.Focused {
		b.WriteString(" focused")
	}
	if s.Paused {
		b.WriteString(" paused")
	}
	fmt.Fprintf(&b, " created=%s activated=%s suspended=%s completed=%s failed=%s last=%d@%s",
		s.CreatedAt.Format("15:04:05"), formatTime(s.ActivatedAt), formatTime(s.SuspendedAt), formatTime(s.CompletedAt),
		formatTime(s.FailedAt), s.LastSeq, s.LastActiveAt.Format("15:04:05"))
	if s.Summary != "" {
		fmt.Fprintf(&b, " summary=%q", s.Summary)
	}
	if s.FailReason != "" {
		fmt.Fprintf(&b, " fail=%q", s.FailReason)
	}
	if s.ActiveDAG != "" || len(s.DAGHistory) > 0 {
		fmt.Fprintf(&b, " active_dag=%s dags=%v", s.ActiveDAG, s.DAGHistory)
	}
	if s.Fork != nil {
		fmt.Fprintf(&b, " fork_of=%s@%d (at seq %d)", s.Fork.Parent, s.Fork.ParentSeq, s.Fork.Seq)
	}
	b.WriteString("\n  transitions:")
	for _, tr := range s.Transitions {
		from := string(tr.From)
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(&b, " %d:%s>%s(%s)", tr.Seq, from, tr.To, tr.Event)
	}
	c, _ := json.Marshal(s.Context)
	if string(c) != "{}" {
		fmt.Fprintf(&b, "\n  context: %s", c)
	}
	return b.String()
}

func formatFrontier(f *projections.Frontier) string {
	nodes := func(ns []projections.FrontierNode) string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprintf("%s#%d@%d", n.ID, n.Index, n.Attempt))
		}
		return "[" + strings.Join(out, " ") + "]"
	}
	var counts []string
	for _, st := range slices.Sorted(maps.Keys(f.Counts)) {
		counts = append(counts, fmt.Sprintf("%s=%d", st, f.Counts[st]))
	}
	return fmt.Sprintf("%s in %s: %s, %d nodes [%s] ready=%s failed=%s blocked=%s done_layers=%d checkpointed=%d",
		f.ID, f.Session, f.State, f.Nodes, strings.Join(counts, " "), nodes(f.Ready), nodes(f.Failed), nodes(f.Blocked), f.DoneLayers, f.Checkpointed)
}

func formatDAG(d *projections.DAG) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s in %s: %s, layer %d of %d", d.ID, d.Session, d.State, d.CurrentLayer, len(d.Layers))
	var counts []string
	for _, s := range projections.NodeStates {
		if n := d.Counts[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%s=%d", s, n))
		}
	}
	fmt.Fprintf(&b, " [%s]", strings.Join(counts, " "))
	if len(d.Layers) > 0 {
		fmt.Fprintf(&b, " layers=%v", d.Layers)
	}
	if len(d.Problems) > 0 {
		fmt.Fprintf(&b, "\n  problems: %s", strings.Join(d.Problems, "; "))
	}
	if d.Outcome != nil {
		fmt.Fprintf(&b, "\n  outcome: %s %q at seq %d", d.Outcome.Outcome, d.Outcome.Summary, d.Outcome.Seq)
	}
	for _, n := range d.Nodes {
		fmt.Fprintf(&b, "\n  %s L%d %s", n.ID, n.Layer, n.State)
		if n.Attempt > 0 {
			fmt.Fprintf(&b, " attempt=%d", n.Attempt)
		}
		if n.Result != nil {
			fmt.Fprintf(&b, " result=%q@%d", n.Result.Summary, n.Result.Seq)
		}
		if n.LastError != "" {
			fmt.Fprintf(&b, " error=%q", n.LastError)
		}
		if n.SkipReason != "" {
			fmt.Fprintf(&b, " why=%q", n.SkipReason)
		}
		if n.Help != "" {
			fmt.Fprintf(&b, " help=%q", n.Help)
		}
		for _, c := range n.Calls {
			fmt.Fprintf(&b, " call=%s(start@%d result@%d ok=%v)", c.ID, c.Seq, c.ResultSeq, c.OK)
		}
	}
	return b.String()
}

// timeArgs reads a query's since=, until= (RFC 3339) and limit= arguments.
func timeArgs(t *testing.T, args map[string]string) (since, until time.Time, limit int) {
	for k, to := range map[string]*time.Time{"since": &since, "until": &until} {
		if v := args[k]; v != "" {
			var err error
			if *to, err = time.Parse(time.RFC3339, v); err != nil {
				t.Fatalf("%s=%s: %v", k, v, err)
			}
		}
	}
	if v := args["limit"]; v != "" {
		limit, _ = strconv.Atoi(v)
	}
	return since, until, limit
}

// run executes one datadriven command against the world.
func (w *world) run(t *testing.T, cmd string, args map[string]string, input string) string {
	ctx := w.ctx
	errOut := func(err error) string { return "error: " + err.Error() + "\n" }
	switch cmd {
	case "append":
		return w.appendLines(input)
	case "restart":
		w.restart()
		return fmt.Sprintf("cursor %d\n", w.store.Cursor())
	case "session":
		s, err := w.store.Session(ctx, args["id"])
		if err != nil {
			return errOut(err)
		}
		return formatSession(s) + "\n"
	case "sessions":
		ss, err := w.store.Sessions(ctx, projections.SessionFilter{State: projections.SessionState(args["state"])})
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, s := range ss {
			fmt.Fprintf(&b, "%s %s\n", s.ID, s.State)
		}
		return b.String()
	case "dag":
		var d *projections.DAG
		var err error
		if args["session"] != "" {
			d, err = w.store.SessionDAG(ctx, args["session"], args["id"])
		} else {
			d, err = w.store.DAG(ctx, args["id"])
		}
		if err != nil {
			return errOut(err)
		}
		return formatDAG(d) + "\n"
	case "frontier":
		d, err := w.store.OpenDAG(ctx, args["session"], args["id"])
		if err != nil {
			return errOut(err)
		}
		defer d.Close()
		return formatFrontier(d.Frontier) + "\n"
	case "dags":
		ds, err := w.store.DAGs(ctx, projections.DAGFilter{Session: args["session"], State: projections.DAGState(args["state"])})
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, d := range ds {
			fmt.Fprintf(&b, "%s %s %s\n", d.Session, d.ID, d.State)
		}
		return b.String()
	case "checkpoints":
		cs, err := w.store.Checkpoints(ctx, args["session"], args["dag"])
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&b, "seq %d %s/%s layer %d by %s succeeded=%v failed=%v skipped=%v\n", c.Seq, c.Session, c.DAG, c.Layer, c.Source, c.Succeeded, c.Failed, c.Skipped)
		}
		return b.String()
	case "pending":
		rs, err := w.store.Pending(ctx, args["session"])
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, "%s %s %s asked by %s at seq %d: %q\n", r.Session, r.Correlation, r.Kind, r.Asker, r.Seq, r.Question+r.PlanID)
		}
		if b.Len() == 0 {
			return "(nothing waits)\n"
		}
		return b.String()
	case "plan":
		p, err := w.store.PlanMode(ctx, args["session"])
		if err != nil {
			return errOut(err)
		}
		return formatPlanMode(p)
	case "consults":
		cs, err := w.store.Consults(ctx, args["session"])
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, c := range cs {
			fmt.Fprintf(&b, "%s %s>%s chain=%v blocking=%v %s %q", c.ID, c.From, c.To, c.Chain, c.Blocking, c.State, c.Question)
			if c.AnswerSeq > 0 {
				fmt.Fprintf(&b, " answer@%d=%q", c.AnswerSeq, c.Answer+c.Refused)
			}
			if d := c.Delivered; d != nil {
				fmt.Fprintf(&b, " delivered@%d to %s (parent %s) step %d", d.Seq, d.Key, c.Parent, d.Step)
			}
			b.WriteString("\n")
		}
		return b.String()
	case "request":
		r, err := w.store.PendingRequest(ctx, args["session"], args["ref"])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("%s %s %s asker=%s answer=%q by %s at seq %d\n", r.Correlation, r.Kind, r.State, r.Asker, r.Answer, r.AnsweredBy, r.AnswerSeq)
	case "trace":
		tr, err := w.store.Trace(ctx, args["corr"])
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s sessions=%v confidence=%.4f reroutes=%d", tr.Correlation, tr.Sessions, tr.Confidence, len(tr.Reroutes))
		if tr.Intent != nil {
			fmt.Fprintf(&b, " intent=%q", tr.Intent.OriginalRequest)
		}
		for _, h := range tr.Hops {
			fmt.Fprintf(&b, "\n  %d %s %s>%s %s", h.Seq, h.ID, h.Source, h.Target, h.Type)
			if h.Confidence != nil {
				fmt.Fprintf(&b, " %s:%.2f", h.Confidence.Agent, h.Confidence.Confidence)
			}
		}
		return b.String() + "\n"
	case "tool-result":
		r, seq, err := w.store.ToolResult(ctx, args["call"])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("seq %d call %s tool %s ok=%v stdout=%q\n", seq, r.CallID, r.Tool, r.OK, r.Stdout)
	case "loadout", "loadouts":
		var ls []*projections.Loadout
		if cmd == "loadout" {
			l, err := w.store.Loadout(ctx, args["session"], args["agent"])
			if err != nil {
				return errOut(err)
			}
			ls = append(ls, l)
		} else {
			var err error
			if ls, err = w.store.Loadouts(ctx, args["session"]); err != nil {
				return errOut(err)
			}
		}
		var b strings.Builder
		for _, l := range ls {
			fmt.Fprintf(&b, "%s %s\n", l.Session, l.Agent)
			for _, s := range l.Skills {
				fmt.Fprintf(&b, "  skill %s tier=%d node=%s seq=%d: %s\n", s.Name, s.Tier, s.Node, s.Seq, s.Reason)
			}
			for _, t := range l.Tools {
				fmt.Fprintf(&b, "  tool %s via=%s node=%s seq=%d used=%s\n", t.Name, t.Via, t.Node, t.Seq, t.Used.Format("15:04:05"))
			}
			for _, r := range l.Refused {
				fmt.Fprintf(&b, "  refused %q seq=%d: %s\n", r.Name, r.Seq, r.Reason)
			}
			for _, u := range l.Unloaded {
				fmt.Fprintf(&b, "  unloaded %s node=%s seq=%d: %s\n", u.Name, u.Node, u.Seq, u.Reason)
			}
		}
		if b.Len() == 0 {
			return "(nothing loaded)\n"
		}
		return b.String()
	case "permits":
		ps, err := w.store.Permits(ctx, projections.PermitFilter{Session: args["session"], State: args["state"]})
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&b, "%s %s %s by %s: %s %q (grant %q) at seq %d", p.Session, p.ID, p.State, p.Agent, p.Action, p.Target, p.Grant, p.Seq)
			if p.State != projections.PermitOpen {
				fmt.Fprintf(&b, "; %s by %s at seq %d", p.Scope, p.DecidedBy, p.DecisionSeq)
			}
			b.WriteByte('\n')
		}
		if b.Len() == 0 {
			return "(no permission requests)\n"
		}
		return b.String()
	case "permit":
		p, err := w.store.Permit(ctx, args["id"])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("%s %s %s scope=%s reason=%q\n", p.Session, p.ID, p.State, p.Scope, p.DecisionReason)
	case "grants", "grant":
		var gs []*projections.PermitGrant
		if cmd == "grant" {
			g, err := w.store.PermitGrant(ctx, args["session"], args["action"], args["grant"])
			if err != nil {
				return errOut(err)
			}
			gs = append(gs, g)
		} else {
			var err error
			if gs, err = w.store.PermitGrants(ctx); err != nil {
				return errOut(err)
			}
		}
		var b strings.Builder
		for _, g := range gs {
			fmt.Fprintf(&b, "%s session=%q %s %q allow=%v from %s at seq %d\n", g.Scope, g.Session, g.Action, g.Grant, g.Allow, g.RequestID, g.Seq)
		}
		if b.Len() == 0 {
			return "(nothing remembered)\n"
		}
		return b.String()
	case "audit":
		q := projections.AuditQuery{Category: args["category"], Session: args["session"], Agent: args["agent"], Outcome: args["outcome"]}
		q.Since, q.Until, q.Limit = timeArgs(t, args)
		es, err := w.store.Audit(ctx, q)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, e := range es {
			fmt.Fprintf(&b, "%d %s %s %s %s %s %s %q %s", e.Seq, e.At.Format("15:04:05"), e.Session, e.Category, e.Agent, e.Type, e.Action, e.Target, e.Outcome)
			if e.Reason != "" {
				fmt.Fprintf(&b, " reason=%q", e.Reason)
			}
			for _, k := range slices.Sorted(maps.Keys(e.Details)) {
				fmt.Fprintf(&b, " %s=%s", k, e.Details[k])
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			return "(no audit entries)\n"
		}
		return b.String()
	case "schedules":
		scs, err := w.store.Schedules(ctx)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, sc := range scs {
			fmt.Fprintf(&b, "%s %s spec=%+v fired=%d failures=%d last_due=%s", sc.Name, sc.State, sc.Spec, sc.Fired, sc.Failures, sc.LastDue.Format("01-02 15:04"))
			if sc.Reason != "" {
				fmt.Fprintf(&b, " reason=%q", sc.Reason)
			}
			b.WriteString("\n")
			for _, r := range sc.Runs {
				fmt.Fprintf(&b, "  run due=%s session=%s missed=%d seq=%d %s", r.Due.Format("01-02 15:04"), r.Session, r.Missed, r.Seq, r.Outcome)
				if r.Reason != "" {
					fmt.Fprintf(&b, ": %s", r.Reason)
				}
				b.WriteString("\n")
			}
		}
		if b.Len() == 0 {
			return "(no schedules)\n"
		}
		return b.String()
	case "skill-selection":
		r, seq, err := w.store.SkillSelection(ctx, args["call"])
		if err != nil {
			return errOut(err)
		}
		var names []string
		for _, s := range r.Skills {
			names = append(names, s.Name)
		}
		return fmt.Sprintf("seq %d call %s agent %s strategy %s skills=%v tools=%v\n", seq, r.CallID, r.Agent, r.Strategy, names, r.Tools)
	case "llm-response":
		r, seq, err := w.store.LLMResponse(ctx, args["call"])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("seq %d call %s content=%q\n", seq, r.CallID, r.Content)
	case "embeddings":
		keys := strings.Split(args["keys"], ",")
		got, err := w.store.Embeddings(ctx, keys)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, k := range keys {
			if e, ok := got[k]; ok {
				fmt.Fprintf(&b, "%s model=%s dims=%d text=%s vector=%v\n", k, e.Model, e.Dims, e.TextHash, e.Vector)
			} else {
				fmt.Fprintf(&b, "%s (none)\n", k)
			}
		}
		return b.String()
	case "hook-decision":
		r, seq, err := w.store.HookDecision(ctx, args["call"])
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("seq %d call %s %s %s action=%s reason=%q\n", seq, r.CallID, r.Point, r.Agent, r.Action, r.Reason)
	case "log":
		q := projections.LogQuery{Session: args["session"]}
		if v := args["from"]; v != "" {
			q.From, _ = strconv.ParseUint(v, 10, 64)
		}
		if v := args["until"]; v != "" {
			q.Until, _ = strconv.ParseUint(v, 10, 64)
		}
		if v := args["limit"]; v != "" {
			q.Limit, _ = strconv.Atoi(v)
		}
		page, err := w.store.SessionLog(ctx, q)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, e := range page.Entries {
			env, err := schemas.Unmarshal(e.Data)
			if err != nil {
				return errOut(err)
			}
			fmt.Fprintf(&b, "%d %s %s", e.Seq, env.SessionID, env.Type)
			if e.From != "" {
				fmt.Fprintf(&b, " (from %s)", e.From)
			}
			b.WriteString("\n")
		}
		if page.More {
			fmt.Fprintf(&b, "more from %d\n", page.Next)
		}
		return b.String()
	case "asof":
		var at projections.AsOf
		if v := args["seq"]; v != "" {
			at.Seq, _ = strconv.ParseUint(v, 10, 64)
		}
		if v := args["time"]; v != "" {
			at.Time, _ = time.Parse(time.RFC3339, v)
		}
		view, err := w.store.SessionAsOf(ctx, args["session"], at)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "as of %d\n", view.AsOf)
		if view.Session == nil {
			b.WriteString("no session yet\n")
		} else {
			b.WriteString(formatSession(view.Session) + "\n")
		}
		for _, d := range view.DAGs {
			b.WriteString(formatDAG(d) + "\n")
		}
		for _, c := range view.Checkpoints {
			fmt.Fprintf(&b, "checkpoint %s layer %d at seq %d\n", c.DAG, c.Layer, c.Seq)
		}
		for _, r := range view.Pending {
			fmt.Fprintf(&b, "pending %s %s\n", r.Kind, r.Correlation)
		}
		return b.String()
	case "history":
		q := projections.HistoryQuery{Session: args["session"], Search: strings.ReplaceAll(args["search"], "+", " "),
			CurrentOnly: args["current"] == "true", CrossSession: args["cross"] == "true"}
		for k, to := range map[string]*[]string{"sessions": &q.Sessions, "exclude": &q.ExcludeSessions, "categories": &q.Categories} {
			if v := args[k]; v != "" {
				*to = strings.Split(v, ",")
			}
		}
		q.Since, q.Until, q.Limit = timeArgs(t, args)
		hs, err := w.store.History(ctx, q)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, h := range hs {
			fmt.Fprintf(&b, "%d %s %s %s %s %q", h.Seq, h.At.Format("15:04:05"), h.Session, h.Category, h.Source, h.Summary)
			if h.DAG != "" || h.Node != "" {
				fmt.Fprintf(&b, " dag=%s node=%s", h.DAG, h.Node)
			}
			if len(h.Tags) > 0 {
				fmt.Fprintf(&b, " tags=%s", strings.Join(h.Tags, ","))
			}
			if h.Cause != "" {
				fmt.Fprintf(&b, " cause=%s", h.Cause)
			}
			if h.Promoted {
				b.WriteString(" promoted")
			}
			if h.Score > 0 {
				fmt.Fprintf(&b, " score=%.3f", h.Score)
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			return "(no entries)\n"
		}
		return b.String()
	case "code":
		return w.code(args)
	case "docs":
		return w.docs(args)
	case "graph":
		return w.graph(args)
	case "failures":
		q := projections.FailureQuery{Signature: args["signature"], Search: strings.ReplaceAll(args["search"], "+", " ")}
		q.MinCount, _ = strconv.Atoi(args["min"])
		ms, err := w.store.Failures(ctx, q)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s x%d level=%s sessions=%s approach=%q pattern=%q last=%d %q\n", m.Signature, m.Count, m.Level, strings.Join(m.Sessions, ","), m.Approach, m.ErrorPattern, m.LastSeq, m.LastSummary)
		}
		if b.Len() == 0 {
			return "(no failures)\n"
		}
		return b.String()
	case "pipeline", "pipelines", "group":
		return w.runPipelines(cmd, args)
	case "rejections":
		rs, err := w.store.Rejections(ctx, projections.RejectionFilter{Projection: args["projection"], Session: args["session"]})
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, "%d %s %s %s: %s\n", r.Seq, r.Projection, r.Session, r.Type, r.Reason)
		}
		return b.String()
	case "verify":
		rep, err := w.store.Verify(ctx, w.log)
		if err != nil {
			return errOut(err)
		}
		return fmt.Sprintf("ok: %d keys identical at seq %d\n", rep.Keys, rep.Applied)
	case "status":
		st, err := w.store.Status(ctx)
		if err != nil {
			return errOut(err)
		}
		var b strings.Builder
		names := make([]string, 0, len(st.Projections))
		rej := map[string]int{}
		for _, p := range st.Projections {
			names = append(names, fmt.Sprintf("%s@%d", p.Name, p.Cursor))
			rej[p.Name] = p.Rejected
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "applied %d ready %v cursors %v rejected %v\n", st.Applied, st.Ready, names, rej)
		return b.String()
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

// code runs a code index query and prints its answer one line per item; a
// + in the text is a space.
func (w *world) code(args map[string]string) string {
	q := projections.CodeQuery{Root: args["root"], Kind: args["kind"], Text: strings.ReplaceAll(args["text"], "+", " ")}
	if v := args["limit"]; v != "" {
		q.Limit, _ = strconv.Atoi(v)
	}
	if m := args["model"]; m != "" {
		q.Embedding = &projections.CodeEmbedding{Model: m}
		for _, x := range strings.Split(args["vector"], ",") {
			f, _ := strconv.ParseFloat(x, 32)
			q.Embedding.Vector = append(q.Embedding.Vector, float32(f))
		}
	}
	res, err := w.store.Code(w.ctx, q)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	if !res.Indexed {
		b.WriteString("(not indexed)\n")
	}
	if res.Ranking == projections.RankHybrid {
		fmt.Fprintf(&b, "%s over %d vectors\n", res.Ranking, res.Vectors)
	}
	for _, h := range res.Hits {
		fmt.Fprintf(&b, "%.3f %s %s", h.Score, h.Path, h.Lang)
		if res.Ranking == projections.RankHybrid {
			fmt.Fprintf(&b, " lex=%.3f cos=%.3f", h.Lexical, h.Similarity)
			if h.Graph > 0 {
				fmt.Fprintf(&b, " graph=%.3f knowledge=%.3f", h.Graph, h.Knowledge)
			}
		}
		for _, s := range h.Symbols {
			fmt.Fprintf(&b, " %s:%d", s.Name, s.Line)
		}
		b.WriteString("\n")
	}
	for _, s := range res.Symbols {
		fmt.Fprintf(&b, "%s %s recv=%s %s:%d-%d pkg=%s doc=%v %q\n", s.Kind, s.Name, s.Recv, s.Path, s.Line, s.EndLine, s.Package, s.Doc, s.Signature)
	}
	for _, c := range res.Calls {
		fmt.Fprintf(&b, "%s:%d %s -> %s\n", c.Path, c.Line, c.From, c.To)
	}
	for _, p := range res.Packages {
		fmt.Fprintf(&b, "package %s\n", p)
	}
	if h := res.Health; h != nil {
		fmt.Fprintf(&b, "%s: %s files=%d source=%d tests=%d lines=%d test_ratio=%.2f debt=%d debt/1k=%.1f documented=%.2f\n  %s\n",
			h.Area, h.Maturity, h.Files, h.SourceFiles, h.TestFiles, h.Lines, h.TestRatio, h.DebtMarkers, h.DebtPer1K, h.Documented, h.Recommendation)
	}
	if st := res.Status; st != nil {
		fmt.Fprintf(&b, "files=%d terms=%d seq=%d skipped=%d\n", st.Files, st.Length, st.Seq, st.SkippedTotal)
		for _, s := range st.Skipped {
			fmt.Fprintf(&b, "  skipped %s: %s\n", s.Path, s.Reason)
		}
	}
	paths := make([]string, 0, len(res.Hashes))
	for p := range res.Hashes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, "hash %s %s\n", p, res.Hashes[p])
	}
	if len(res.Unknown) > 0 {
		fmt.Fprintf(&b, "unknown terms: %s\n", strings.Join(res.Unknown, ","))
	}
	if b.Len() == 0 {
		return "(nothing)\n"
	}
	return b.String()
}

// docs runs a documents query and prints its answer one line per item; a
// + in the text is a space.
func (w *world) docs(args map[string]string) string {
	q := projections.DocsQuery{Kind: args["kind"], Text: strings.ReplaceAll(args["text"], "+", " "), Path: args["path"]}
	if m := args["model"]; m != "" {
		q.Embedding = &projections.CodeEmbedding{Model: m}
		for _, x := range strings.Split(args["vector"], ",") {
			f, _ := strconv.ParseFloat(x, 32)
			q.Embedding.Vector = append(q.Embedding.Vector, float32(f))
		}
	}
	res, err := w.store.Docs(w.ctx, q)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "corpus: %d docs, %d chunks\n", res.TotalDocs, res.TotalChunks)
	if res.Ranking == projections.RankHybrid {
		fmt.Fprintf(&b, "%s over %d vectors\n", res.Ranking, res.Vectors)
	}
	for _, h := range res.Hits {
		fmt.Fprintf(&b, "%.3f %s#%s [%d] %q", h.Score, h.Path, h.Section, h.Chunk, h.Text)
		if res.Ranking == projections.RankHybrid {
			fmt.Fprintf(&b, " lex=%.3f cos=%.3f", h.Lexical, h.Similarity)
		}
		b.WriteString("\n")
	}
	for _, d := range res.Docs {
		fmt.Fprintf(&b, "doc %s %s %q chunks=%d hash=%s seq=%d\n", d.Path, d.Format, d.Title, d.Chunks, d.Hash, d.Seq)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(&b, "skipped %s: %s\n", s.Path, s.Reason)
	}
	for _, c := range res.Chunks {
		fmt.Fprintf(&b, "chunk %q %q embed=%s\n", c.Section, c.Text, c.EmbedHash)
	}
	if len(res.Unknown) > 0 {
		fmt.Fprintf(&b, "unknown terms: %s\n", strings.Join(res.Unknown, ","))
	}
	return b.String()
}

// graph runs a knowledge graph query and prints its answer one line per
// node or edge; list arguments are comma-separated.
func (w *world) graph(args map[string]string) string {
	q := projections.GraphQuery{Kind: args["kind"], ID: args["id"], Domain: args["domain"], Direction: args["dir"], Superseded: args["superseded"] == "true"}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	q.NodeTypes, q.EdgeTypes = split(args["types"]), split(args["edges"])
	q.Depth, _ = strconv.Atoi(args["depth"])
	q.Limit, _ = strconv.Atoi(args["limit"])
	q.MinWeight, _ = strconv.ParseFloat(args["min"], 64)
	q.Text, q.IDs = strings.ReplaceAll(args["text"], "+", " "), split(args["ids"])
	if m := args["model"]; m != "" {
		q.Embedding = &projections.CodeEmbedding{Model: m}
		for _, x := range split(args["vector"]) {
			f, _ := strconv.ParseFloat(x, 32)
			q.Embedding.Vector = append(q.Embedding.Vector, float32(f))
		}
	}
	res, err := w.store.Graph(w.ctx, q)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	node := func(n *projections.GraphNodeRec) string {
		s := fmt.Sprintf("%s %s/%s %q trust=%d %s:%s seq=%d by=%s", n.ID, n.Domain, n.Type, n.Name, n.Trust, n.Source, n.Ref, n.Seq, n.Agent)
		if n.SupersededBy != "" {
			s += fmt.Sprintf(" superseded-by=%s@%d %q", n.SupersededBy, n.SupersededSeq, n.SupersedeReason)
		}
		return s
	}
	if res.Node != nil {
		b.WriteString(node(res.Node) + "\n")
	}
	for _, e := range res.Edges {
		fmt.Fprintf(&b, "  %s %s -%s-> %s w=%.2f trust=%d %s:%s seq=%d\n", e.Direction, e.From, e.Type, e.To, e.Weight, e.Trust, e.Source, e.Ref, e.Seq)
	}
	for _, h := range res.Nodes {
		if q.Kind == projections.GraphTraverse {
			fmt.Fprintf(&b, "%.3f d=%d %s via %s: ", h.Score, h.Depth, strings.Join(h.Path, ">"), strings.Join(h.Via, ","))
		}
		b.WriteString(node(&h.Node) + "\n")
	}
	if q.Kind == projections.GraphSearch {
		fmt.Fprintf(&b, "%s over %d vectors\n", res.Ranking, res.Vectors)
	}
	for _, h := range res.Hits {
		fmt.Fprintf(&b, "%.4f %s lex=%.3f cos=%.3f graph=%.3f", h.Score, h.Node.ID, h.Lexical, h.Similarity, h.Graph)
		if len(h.Path) > 0 {
			fmt.Fprintf(&b, " via %s (%s)", strings.Join(h.Path, ">"), strings.Join(h.Via, ","))
		}
		b.WriteString("\n")
	}
	if len(res.Unknown) > 0 {
		fmt.Fprintf(&b, "unknown terms: %s\n", strings.Join(res.Unknown, ","))
	}
	for _, id := range slices.Sorted(maps.Keys(res.Embeds)) {
		fmt.Fprintf(&b, "embed %s %s", id, res.Embeds[id])
		if t, ok := res.Texts[id]; ok {
			fmt.Fprintf(&b, " %q", t)
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "(nothing)\n"
	}
	return b.String()
}

func newMemFS() vfs.FS { return vfs.NewMem() }

func formatPlanMode(p *projections.PlanMode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s plan=%s v%d dag=%s last=%d\n", p.Session, p.State, orNone(p.PlanID), p.Version, orNone(p.DAGID), p.Seq)
	b.WriteString("  transitions:")
	for _, tr := range p.Transitions {
		fmt.Fprintf(&b, " %d:%s>%s(%s)", tr.Seq, tr.From, tr.To, tr.Event)
	}
	b.WriteString("\n")
	for _, v := range p.Versions {
		fmt.Fprintf(&b, "  v%d %s at seq %d %q steps=%d todos=%d", v.Version, v.PlanID, v.Seq, v.Plan.Title, len(v.Plan.Steps), len(v.Plan.Todos))
		if v.Outcome != "" {
			fmt.Fprintf(&b, " %s@%d", v.Outcome, v.AnswerSeq)
		}
		if v.Feedback != "" {
			fmt.Fprintf(&b, " feedback=%q", v.Feedback)
		}
		b.WriteString("\n")
	}
	if len(p.Steps) > 0 {
		fmt.Fprintf(&b, "  steps: %s\n", strings.Join(p.Steps, " "))
	}
	if len(p.Todos) > 0 {
		fmt.Fprintf(&b, "  todos: %s\n", strings.Join(p.Todos, " "))
	}
	if p.FailedStep > 0 || p.FailureReason != "" {
		fmt.Fprintf(&b, "  failed step %d: %s\n", p.FailedStep, p.FailureReason)
	}
	for _, h := range p.Held {
		fmt.Fprintf(&b, "  held %s@%d %q\n", h.ID, h.Seq, h.Text)
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
