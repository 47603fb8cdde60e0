package schemas

// Agent memory (seed L26769-28295): per-agent context policies make an agent
// write a typed summary of its conversation at set percentages of its context
// window (a checkpoint, kept by the Archivalist) and, past a threshold,
// replace its old turns by that summary (a compaction).
const (
	TypeMemoryCheckpoint Type = "memory_checkpoint"
	TypeMemoryCompacted  Type = "memory_compacted"
	// The Engineer's pipeline handoff at 95% of its window (seed
	// L27898-28032): its request to the pipeline agent, and the handoff the
	// pipeline agent makes of it (the old pipeline closed, a new one started
	// with the bundled state), kept by the Archivalist.
	TypePipelineHandoffRequest Type = "pipeline_handoff_request"
	TypePipelineHandoff        Type = "pipeline_handoff"
)

// CategoryPipelineHandoff is the Archivalist's category of pipeline handoffs.
const CategoryPipelineHandoff = "pipeline_handoff"

// Kinds of memory checkpoints, each the seed's summary of one agent, and the
// Archivalist's category for it.
const (
	MemoryCodebase = "codebase_summary"        // Librarian, L26848
	MemoryRouting  = "guide_summary"           // Guide, L27438
	MemoryResearch = "academic_research_paper" // Academic, L27713
	MemoryWorkflow = "architect_workflow"      // Architect, L27752
	MemoryFindings = "inspector_findings"      // Inspector, L27803
	MemoryTests    = "tester_summary"          // Tester, L27856
	MemoryEngineer = "engineer_handoff"        // Engineer, L27975 (summarise and compact when a handoff fails)
)

// MemoryCheckpoint is one typed summary of an agent's conversation. Key names
// the conversation (the calls' key prefix); Index counts its checkpoints from
// 1; ContextUsage is the share of the window used when it was taken. One of
// the typed summaries is set, per Kind; Text is the summary as the agent
// reads it back after a compaction.
type MemoryCheckpoint struct {
	Agent        string  `json:"agent"`
	Kind         string  `json:"kind"`
	Category     string  `json:"category"`
	Key          string  `json:"key"`
	Index        int     `json:"index"`
	ContextUsage float64 `json:"context_usage"`
	DAGID        string  `json:"dag_id,omitempty"`
	NodeID       string  `json:"node_id,omitempty"`
	Text         string  `json:"text"`

	Codebase *CodebaseSummary          `json:"codebase,omitempty"`
	Routing  *GuideSummary             `json:"routing,omitempty"`
	Research *AcademicResearchPaper    `json:"research,omitempty"`
	Workflow *ArchitectWorkflowSummary `json:"workflow,omitempty"`
	Findings *InspectorFindingsSummary `json:"findings,omitempty"`
	Tests    *TesterSummary            `json:"tests,omitempty"`
	Engineer *EngineerHandoffState     `json:"engineer,omitempty"`
}

// MemoryCompacted says a conversation's old turns were replaced by the
// summary of checkpoint Checkpoint (its event id).
type MemoryCompacted struct {
	Agent        string `json:"agent"`
	Key          string `json:"key"`
	Checkpoint   string `json:"checkpoint"`
	Replaced     int    `json:"replaced"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
	// Reason says why an agent that hands off compacted instead (a handoff
	// that failed or could not be made); empty for a compaction by policy.
	Reason string `json:"reason,omitempty"`
	// ContextLimit is the tokens the conversation may fill: the model's
	// window less the room reserved for its answer.
	ContextLimit int `json:"context_limit"`
}

// CodebaseSummary is the Librarian's checkpoint (seed L26848).
type CodebaseSummary struct {
	DirectoryStructure string   `json:"directory_structure,omitempty"`
	KeyPaths           []string `json:"key_paths,omitempty"`
	CodeStyle          string   `json:"code_style,omitempty"`
	Architecture       string   `json:"architecture,omitempty"`
	TestingStrategy    string   `json:"testing_strategy,omitempty"`
	Tooling            []string `json:"tooling,omitempty"`
	Patterns           []string `json:"patterns,omitempty"`
	Conventions        []string `json:"conventions,omitempty"`
	NewDiscoveries     []string `json:"new_discoveries,omitempty"`
}

// GuideSummary is the Guide's checkpoint (seed L27438).
type GuideSummary struct {
	KnownRoutings   map[string]string `json:"known_routings,omitempty"`
	FailedRoutings  []string          `json:"failed_routings,omitempty"`
	RequestPatterns []string          `json:"request_patterns,omitempty"`
}

// AcademicResearchPaper is the Academic's checkpoint (seed L27713).
type AcademicResearchPaper struct {
	Title            string       `json:"title,omitempty"`
	Abstract         string       `json:"abstract,omitempty"`
	TopicsResearched []string     `json:"topics_researched,omitempty"`
	KeyFindings      []KeyFinding `json:"key_findings,omitempty"`
	Recommendations  []string     `json:"recommendations,omitempty"`
	OpenQuestions    []string     `json:"open_questions,omitempty"`
}

// KeyFinding is one finding of a research paper.
type KeyFinding struct {
	Topic      string   `json:"topic"`
	Summary    string   `json:"summary"`
	Confidence string   `json:"confidence,omitempty"`
	Sources    []string `json:"sources,omitempty"`
}

// ArchitectWorkflowSummary is the Architect's checkpoint (seed L27752).
type ArchitectWorkflowSummary struct {
	OriginalRequest        string        `json:"original_request,omitempty"`
	ImplementationPlan     string        `json:"implementation_plan,omitempty"`
	CompletedTasks         []TaskSummary `json:"completed_tasks,omitempty"`
	PendingTasks           []TaskSummary `json:"pending_tasks,omitempty"`
	BlockedTasks           []TaskSummary `json:"blocked_tasks,omitempty"`
	ArchitecturalDecisions []string      `json:"architectural_decisions,omitempty"`
	Risks                  []string      `json:"risks,omitempty"`
	Assumptions            []string      `json:"assumptions,omitempty"`
}

// TaskSummary is one task of a workflow summary.
type TaskSummary struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Status      string `json:"status,omitempty"`
	AssignedTo  string `json:"assigned_to,omitempty"`
	Result      string `json:"result,omitempty"`
}

// InspectorFindingsSummary is the Inspector's checkpoint (seed L27803).
type InspectorFindingsSummary struct {
	ChecksPerformed []string        `json:"checks_performed,omitempty"`
	IssuesFound     int             `json:"issues_found,omitempty"`
	IssuesResolved  int             `json:"issues_resolved,omitempty"`
	IssuesRemaining int             `json:"issues_remaining,omitempty"`
	FixesPending    []Finding       `json:"fixes_pending,omitempty"`
	ValidationState map[string]bool `json:"validation_state,omitempty"`
}

// Finding is one issue an Inspector found.
type Finding struct {
	File         string `json:"file,omitempty"`
	Line         int    `json:"line,omitempty"`
	Description  string `json:"description"`
	Severity     string `json:"severity,omitempty"`
	SuggestedFix string `json:"suggested_fix,omitempty"`
}

// TesterSummary is the Tester's checkpoint (seed L27856).
type TesterSummary struct {
	TestsCreated        []string `json:"tests_created,omitempty"`
	PassCount           int      `json:"pass_count,omitempty"`
	FailCount           int      `json:"fail_count,omitempty"`
	SkipCount           int      `json:"skip_count,omitempty"`
	CoverageNeeded      []string `json:"coverage_needed,omitempty"`
	FailureDescriptions []string `json:"failure_descriptions,omitempty"`
}

// EngineerHandoffState is what an Engineer hands on (seed L27975): the
// pipeline handoff's state, and the summary of a summarise-and-compact when
// the handoff fails.
type EngineerHandoffState struct {
	OriginalPrompt string   `json:"original_prompt,omitempty"`
	Accomplished   []string `json:"accomplished,omitempty"`
	FilesChanged   []string `json:"files_changed,omitempty"`
	Remaining      []string `json:"remaining,omitempty"`
	ContextNotes   string   `json:"context_notes,omitempty"`
}

// InspectorHandoffState is what a pipeline's Inspector has established, handed
// to the next pipeline (seed L27983).
type InspectorHandoffState struct {
	Criteria        string          `json:"criteria,omitempty"`
	ChecksPerformed []string        `json:"checks_performed,omitempty"`
	FixesRemaining  []string        `json:"fixes_remaining,omitempty"`
	ValidationState map[string]bool `json:"validation_state,omitempty"`
}

// TesterHandoffState is what a pipeline's Tester has established (seed
// L27990).
type TesterHandoffState struct {
	TestsCreated string   `json:"tests_created,omitempty"`
	TestResults  []string `json:"test_results,omitempty"`
	FailureDescs []string `json:"failure_descs,omitempty"`
}

// PipelineHandoffRequest is the Engineer's request, in place of its stage's
// result, to hand its pipeline over: its conversation filled Reason's share
// of its window. Checkpoint is the memory_checkpoint holding its state.
type PipelineHandoffRequest struct {
	PipelineID   string                `json:"pipeline_id"`
	Stage        string                `json:"stage"`
	Loop         int                   `json:"loop"`
	Reason       string                `json:"reason"`
	ContextUsage float64               `json:"context_usage"`
	Checkpoint   string                `json:"checkpoint"`
	Engineer     *EngineerHandoffState `json:"engineer,omitempty"`
	// Summary is the checkpoint's text, for a state that did not decode.
	Summary string `json:"summary,omitempty"`
}

// PipelineHandoff closes pipeline OldPipelineID and names NewPipelineID,
// which starts with the three agents' states (seed L27959). HandoffIndex
// counts the node's handoffs from 1.
type PipelineHandoff struct {
	OldPipelineID string                 `json:"old_pipeline_id"`
	NewPipelineID string                 `json:"new_pipeline_id"`
	DAGID         string                 `json:"dag_id"`
	NodeID        string                 `json:"node_id"`
	Reason        string                 `json:"reason"`
	HandoffIndex  int                    `json:"handoff_index"`
	Loop          int                    `json:"loop"`
	Engineer      *EngineerHandoffState  `json:"engineer,omitempty"`
	Summary       string                 `json:"summary,omitempty"`
	Inspector     *InspectorHandoffState `json:"inspector,omitempty"`
	Tester        *TesterHandoffState    `json:"tester,omitempty"`
}

var memoryTypes = map[Type]typeInfo{
	TypeMemoryCheckpoint:       entry[MemoryCheckpoint]("An agent's typed summary of its conversation at a share of its context window; the Archivalist keeps it."),
	TypeMemoryCompacted:        entry[MemoryCompacted]("An agent's old turns were replaced by a checkpoint's summary."),
	TypePipelineHandoffRequest: entry[PipelineHandoffRequest]("An Engineer whose conversation filled 95% of its window asks to hand its pipeline to a new one, with its state."),
	TypePipelineHandoff:        entry[PipelineHandoff]("A pipeline handed over: the old one closed, the new one named, with the Engineer's, Inspector's and Tester's states."),
}
