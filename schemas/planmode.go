package schemas

// Plan mode (seed L34842-37188): a session in which the agents only read and
// consult while the Architect explores and drafts a plan; the plan runs once
// the user approves it. The states are a fold over these events and the plan
// flow's own (plan_request, plan_response with a Mode plan, plan_approved,
// plan_modified, dag_execute, the DAG's progress): see the plans projection.
const (
	TypePlanEnter   Type = "plan_enter"
	TypePlanExit    Type = "plan_exit"
	TypePlanDraft   Type = "plan_draft"
	TypePlanExplore Type = "plan_explore"
)

// Plan-mode states of a session (seed L34877-34940). Idle is plan mode off.
const (
	PlanIdle             = "idle"
	PlanExploring        = "exploring"
	PlanDrafting         = "drafting"
	PlanAwaitingApproval = "awaiting_approval"
	PlanApprovedState    = "approved"
	PlanExecuting        = "executing"
	PlanCompleted        = "completed"
	PlanFailed           = "failed"
)

// PlanReadOnly reports whether a session in plan-mode state s may only read
// and consult: while the plan is explored, drafted or waits for approval.
func PlanReadOnly(s string) bool {
	return s == PlanExploring || s == PlanDrafting || s == PlanAwaitingApproval
}

// Step and todo statuses of a plan (seed L34990-35010, glyphs L36217-36297).
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
	StepFailed     = "failed"
	StepSkipped    = "skipped"
)

// PlanEnter turns plan mode on for the event's session.
type PlanEnter struct {
	Reason string `json:"reason,omitempty"`
}

// PlanExit turns plan mode off for the event's session.
type PlanExit struct {
	Reason string `json:"reason,omitempty"`
}

// PlanDraft says the Architect has explored enough and writes a draft.
type PlanDraft struct {
	Title string `json:"title,omitempty"`
}

// PlanExplore sends a draft back to exploration, with what was wrong.
type PlanExplore struct {
	Problems []string `json:"problems,omitempty"`
}

// ModePlan is a plan drafted in plan mode (the seed's Plan, L34942-35030):
// what it changes and the steps that do it. The plan_response carrying it
// also carries the DAG of its steps (node "step-N" is step N), so it is
// approved, modified and run like any plan.
type ModePlan struct {
	Title          string     `json:"title"`
	Overview       string     `json:"overview,omitempty"`
	Files          []PlanFile `json:"files,omitempty"`
	Steps          []PlanStep `json:"steps"`
	Todos          []PlanTodo `json:"todos,omitempty"`
	Considerations []string   `json:"considerations,omitempty"`
}

// PlanFile is a file the plan will change. Action is create, modify or delete.
type PlanFile struct {
	Path        string `json:"path"`
	Action      string `json:"action"`
	Description string `json:"description,omitempty"`
}

// PlanStep is one step: an agent's task. DependsOn names earlier steps by
// their 1-based index.
type PlanStep struct {
	Description string `json:"description"`
	Agent       string `json:"agent"`
	DependsOn   []int  `json:"depends_on,omitempty"`
}

// PlanTodo is one item of the plan's todo list; Step ties it to a step (1-based;
// 0: the plan as a whole).
type PlanTodo struct {
	Content    string `json:"content"`
	ActiveForm string `json:"active_form,omitempty"`
	Step       int    `json:"step,omitempty"`
}

var planModeTypes = map[Type]typeInfo{
	TypePlanEnter:   entry[PlanEnter]("Turn plan mode on: the agents only read and consult until a plan is approved."),
	TypePlanExit:    entry[PlanExit]("Turn plan mode off."),
	TypePlanDraft:   entry[PlanDraft]("The Architect drafts a plan from what it explored."),
	TypePlanExplore: entry[PlanExplore]("A draft goes back to exploration, with its problems."),
}
