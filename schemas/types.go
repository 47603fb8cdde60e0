package schemas

import (
	"fmt"
	"reflect"
	"sort"
)

// Type names a message type. On the wire and in subjects it is the lower-snake form
// of the seed's name: TASK_DISPATCH is "task_dispatch".
type Type string

// The seed's catalogue (seed L140-196 and the types used later in the seed,
// seed-002-a E4).
const (
	TypeUserInput                  Type = "user_input"
	TypeUserResponse               Type = "user_response"
	TypeSessionCreate              Type = "session_create"
	TypeSessionSwitch              Type = "session_switch"
	TypeSessionSuspend             Type = "session_suspend"
	TypeSessionResume              Type = "session_resume"
	TypeSessionComplete            Type = "session_complete"
	TypeResearchRequest            Type = "research_request"
	TypeResearchResponse           Type = "research_response"
	TypeContextRequest             Type = "context_request"
	TypeContextResponse            Type = "context_response"
	TypeHistoryRequest             Type = "history_request"
	TypeHistoryResponse            Type = "history_response"
	TypeStoreRequest               Type = "store_request"
	TypePlanRequest                Type = "plan_request"
	TypePlanResponse               Type = "plan_response"
	TypePlanApproved               Type = "plan_approved"
	TypePlanModified               Type = "plan_modified"
	TypeDAGExecute                 Type = "dag_execute"
	TypeDAGStatus                  Type = "dag_status"
	TypeTaskDispatch               Type = "task_dispatch"
	TypeTaskComplete               Type = "task_complete"
	TypeTaskFailed                 Type = "task_failed"
	TypeTaskHelp                   Type = "task_help"
	TypeClarificationRequest       Type = "clarification_request"
	TypeClarificationResponse      Type = "clarification_response"
	TypeValidateTask               Type = "validate_task"
	TypeValidationResult           Type = "validation_result"
	TypeValidationFull             Type = "validation_full"
	TypeValidationCorrections      Type = "validation_corrections"
	TypeTestPlanRequest            Type = "test_plan_request"
	TypeTestPlanResponse           Type = "test_plan_response"
	TypeTestDAGRequest             Type = "test_dag_request"
	TypeTestsReady                 Type = "tests_ready"
	TypeTestResults                Type = "test_results"
	TypeTestCorrections            Type = "test_corrections"
	TypeUserOverride               Type = "user_override"
	TypeUserInterrupt              Type = "user_interrupt"
	TypeWorkflowComplete           Type = "workflow_complete"
	TypeRerouteRequest             Type = "reroute_request"
	TypeDomainExpectationsRequest  Type = "domain_expectations_request"
	TypeDomainExpectationsResponse Type = "domain_expectations_response"
	TypeConsultRequest             Type = "consult_request"
	TypeConsultResponse            Type = "consult_response"
	TypeStreamControl              Type = "stream_control"
)

// Event types the runtime adds to the seed's catalogue: lifecycle, progress and
// side-effect records that make state a fold over the stream.
const (
	TypeSessionFail       Type = "session_fail"
	TypeDAGRejected       Type = "dag_rejected"
	TypeNodeSkipped       Type = "node_skipped"
	TypeNodeRetry         Type = "node_retry"
	TypeCheckpoint        Type = "checkpoint"
	TypeToolCall          Type = "tool_call"
	TypeToolResult        Type = "tool_result"
	TypeLLMRequest        Type = "llm_request"
	TypeLLMResponse       Type = "llm_response"
	TypeLLMUsage          Type = "llm_usage"
	TypeSignal            Type = "signal"
	TypeDeadLetter        Type = "dead_letter"
	TypeCircuitChange     Type = "circuit_change"
	TypeAgentRestart      Type = "agent_restart"
	TypeNotice            Type = "notice"
	TypeHistoryEntry      Type = "history_entry"
	TypeStreamChunk       Type = "stream_chunk"
	TypeSessionContextSet Type = "session_context_set"
)

// typeInfo is one catalogue entry: what the type is for and its payload struct.
type typeInfo struct {
	doc     string
	payload reflect.Type
}

func entry[P any](doc string) typeInfo {
	return typeInfo{doc: doc, payload: reflect.TypeFor[P]()}
}

// catalogue is immutable after package initialisation. Each area of the runtime
// keeps its types in a table of its own (coreTypes here; the others beside their
// payloads), joined once here.
var catalogue = joinCatalogues(coreTypes, knowledgeTypes, forkTypes, skillTypes, securityTypes, hookTypes, vectorTypes, docTypes, permissionTypes, pipelineTypes, scheduleTypes, planModeTypes, memoryTypes, configTypes, consultTypes, graphTypes, resourceTypes)

// joinCatalogues merges the areas' tables; a type named twice is a programming
// error caught by the first test that loads the package.
func joinCatalogues(tables ...map[Type]typeInfo) map[Type]typeInfo {
	out := make(map[Type]typeInfo)
	for _, t := range tables {
		for k, v := range t {
			if _, dup := out[k]; dup {
				panic("schemas: type " + string(k) + " is in two catalogue tables")
			}
			out[k] = v
		}
	}
	return out
}

// coreTypes are the seed's message types and the runtime's own.
var coreTypes = map[Type]typeInfo{
	TypeUserInput:                  entry[UserInput]("User message; the Guide classifies and routes it."),
	TypeUserResponse:               entry[UserResponse]("User's answer to an agent's question."),
	TypeSessionCreate:              entry[SessionCreate]("Create a session."),
	TypeSessionSwitch:              entry[SessionSwitch]("Focus another session; the active one is suspended."),
	TypeSessionSuspend:             entry[SessionSuspend]("Suspend a session."),
	TypeSessionResume:              entry[SessionResume]("Resume a suspended session (or activate a created one)."),
	TypeSessionComplete:            entry[SessionComplete]("Complete a session."),
	TypeSessionFail:                entry[SessionFail]("Mark a session failed after an unrecoverable error."),
	TypeSessionContextSet:          entry[SessionContextSet]("Update the session context (task, step, objectives, files)."),
	TypeResearchRequest:            entry[ResearchRequest]("Query for the Academic."),
	TypeResearchResponse:           entry[ResearchResponse]("The Academic's answer."),
	TypeContextRequest:             entry[ContextRequest]("Query for the Librarian."),
	TypeContextResponse:            entry[ContextResponse]("The Librarian's codebase context."),
	TypeHistoryRequest:             entry[HistoryRequest]("Query for the Archivalist."),
	TypeHistoryResponse:            entry[HistoryResponse]("The Archivalist's historical context."),
	TypeStoreRequest:               entry[StoreRequest]("Ask the Archivalist to store an entry."),
	TypeHistoryEntry:               entry[HistoryEntry]("An outcome, failure or decision the Archivalist recorded."),
	TypePlanRequest:                entry[PlanRequest]("Ask the Architect for a plan."),
	TypePlanResponse:               entry[PlanResponse]("The Architect's plan, for the user to approve."),
	TypePlanApproved:               entry[PlanApproved]("The user approved a plan."),
	TypePlanModified:               entry[PlanModified]("The user wants changes to a plan (or rejects it)."),
	TypeDAGExecute:                 entry[DAGExecute]("Submit a DAG to the Orchestrator."),
	TypeDAGRejected:                entry[DAGRejected]("The Orchestrator refused a DAG, with every problem."),
	TypeDAGStatus:                  entry[DAGStatus]("DAG progress from the Orchestrator."),
	TypeTaskDispatch:               entry[TaskDispatch]("Orchestrator to agent: run this node."),
	TypeTaskComplete:               entry[TaskComplete]("A node finished successfully."),
	TypeTaskFailed:                 entry[TaskFailed]("A node failed."),
	TypeTaskHelp:                   entry[TaskHelp]("An agent needs help to finish a node."),
	TypeNodeSkipped:                entry[NodeSkipped]("A node will not run (a dependency failed, or fail-fast)."),
	TypeNodeRetry:                  entry[NodeRetry]("A failed node is scheduled to run again."),
	TypeCheckpoint:                 entry[Checkpoint]("A DAG layer completed; progress up to here is durable."),
	TypeWorkflowComplete:           entry[WorkflowComplete]("A workflow ended, with its summary."),
	TypeClarificationRequest:       entry[ClarificationRequest]("An agent asks the user a question."),
	TypeClarificationResponse:      entry[ClarificationResponse]("The user's answer to a clarification."),
	TypeValidateTask:               entry[ValidateTask]("Ask the Inspector to validate a node's work."),
	TypeValidationResult:           entry[ValidationResult]("The Inspector's pass/fail with evidence."),
	TypeValidationFull:             entry[ValidationFull]("Full validation results for the user."),
	TypeValidationCorrections:      entry[ValidationCorrections]("Fixes the Inspector asks the Architect for."),
	TypeTestPlanRequest:            entry[TestPlanRequest]("Ask the Tester for a test plan."),
	TypeTestPlanResponse:           entry[TestPlanResponse]("The Tester's proposed tests."),
	TypeTestDAGRequest:             entry[TestDAGRequest]("The Tester asks the Architect to implement tests."),
	TypeTestsReady:                 entry[TestsReady]("Tests are implemented and ready to run."),
	TypeTestResults:                entry[TestResults]("Parsed test results with evidence."),
	TypeTestCorrections:            entry[TestCorrections]("Implementation fixes the Tester asks for."),
	TypeUserOverride:               entry[UserOverride]("The user overrides an Inspector or Tester finding."),
	TypeUserInterrupt:              entry[UserInterrupt]("The user interrupts the running work."),
	TypeRerouteRequest:             entry[RerouteRequest]("An agent rejects a request as not its domain."),
	TypeDomainExpectationsRequest:  entry[DomainExpectationsRequest]("The Architect asks the Academic for implicit requirements."),
	TypeDomainExpectationsResponse: entry[DomainExpectationsResponse]("The Academic's domain expectations."),
	TypeConsultRequest:             entry[ConsultRequest]("A direct consultation between agents."),
	TypeConsultResponse:            entry[ConsultResponse]("The answer to a consultation."),
	TypeStreamControl:              entry[StreamControl]("Control of a running LLM stream (cancel)."),
	TypeStreamChunk:                entry[StreamChunk]("One LLM token chunk (live subjects only, never stored)."),
	TypeToolCall:                   entry[ToolCall]("A tool call is about to run (recorded before the side effect)."),
	TypeToolResult:                 entry[ToolResult]("The recorded result of a tool call."),
	TypeLLMRequest:                 entry[LLMRequest]("An LLM call is about to be made (recorded before the side effect)."),
	TypeLLMResponse:                entry[LLMResponse]("The recorded response of an LLM call."),
	TypeLLMUsage:                   entry[LLMUsage]("Tokens and cost of one LLM call, attributed."),
	TypeSignal:                     entry[Signal]("Pause, resume or cancel a session or everything."),
	TypeDeadLetter:                 entry[DeadLetter]("A message was given up on and moved to SYLK_DLQ."),
	TypeCircuitChange:              entry[CircuitChange]("A circuit breaker opened, half-opened or closed."),
	TypeAgentRestart:               entry[AgentRestart]("The supervisor restarted a crashed agent loop."),
	TypeNotice:                     entry[Notice]("A message for the user from the runtime."),
}

// Types returns every type of the catalogue, sorted.
func Types() []Type {
	out := make([]Type, 0, len(catalogue))
	for t := range catalogue {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Known reports whether t is in the catalogue.
func (t Type) Known() bool {
	_, ok := catalogue[t]
	return ok
}

// Doc returns the one-line description of t, or "" for an unknown type.
func (t Type) Doc() string { return catalogue[t].doc }

// NewPayload returns a pointer to a zero payload struct registered for t.
func NewPayload(t Type) (any, error) {
	info, ok := catalogue[t]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, string(t))
	}
	return reflect.New(info.payload).Interface(), nil
}

// PayloadType returns the Go type of t's payload.
func PayloadType(t Type) (reflect.Type, bool) {
	info, ok := catalogue[t]
	return info.payload, ok
}
