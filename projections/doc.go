// Package projections folds the event log into Pebble read models: sessions, DAG
// progress, checkpoints, what waits on the user, each session's events, traces
// by correlation id, the index of recorded tool results and LLM responses, and
// the history the Archivalist records.
//
// All state is a fold over the SYLK stream. A [Projector] reads the stream in
// order and applies each event to every projection; each projection writes its
// state changes and its cursor (the last stream sequence it applied) in the same
// Pebble batch, so a crash at any moment leaves state and cursor consistent and
// the projector resumes at cursor+1. Apply is a pure function of (state, event):
// timestamps come from the events, never the wall clock, and a projection reads
// only its own keys, so each can be dropped and rebuilt alone. What else in the
// process follows the stream live (the web view of `sylk serve --http`) is
// handed each event by the projector's reader ([Store.Observe]), decoded once
// for both, instead of reading the stream a second time.
//
// An event that breaks a rule (an illegal session transition, a task event for
// an unknown DAG node, an answer to a question nobody asked) is recorded as a
// [Rejection] with the reason and changes nothing else; it never stops the
// projector.
//
// Projections and their keys (ids are [A-Za-z0-9_-], so 0x00 separates them;
// sequences are 8-byte big-endian so ranges are ordered):
//
//	sessions     sessions/s/<sid>                  Session
//	             sessions/focus, sessions/global   focused session, global pause
//	dags         dags/d/<sid>\0<dag>               DAG: header, first 16 nodes
//	             dags/n/<sid>\0<dag>\0<chunk>      16 more nodes
//	             dags/id/<dag>\0<sid>              DAG id -> session
//	             dags/f/<sid>\0<dag>               DAG frontier (what a scheduler step reads)
//	             dags/running                      running DAGs (for cancel)
//	checkpoints  checkpoints/c/<sid>\0<dag>\0<seq> Checkpoint
//	pending      pending/p/<sid>\0<corr>           PendingRequest
//	log          log/s/<sid>\0<seq>                the event's bytes (an index_update's without the payload)
//	             log/g/<seq>                       global (scope all) signals
//	             log/fork/<sid>                    a fork's ForkOf: its lineage
//	trace        trace/<corr>\0<seq>               the hop's session
//	calls        calls/tool/<call>, calls/llm/<call>  seq + recorded payload
//	             calls/skills/<call>               seq + recorded skill selection
//	             calls/hook/<call>                 seq + recorded hook decision
//	             (the first record of a call stands; a second is refused)
//	history      history/e/<time><seq>             HistoryEntry
//	             history/s/<sid>\0<time><seq>      by session
//	             history/c/<category>\0<time><seq> by category
//	             history/t/<term>\0<time><seq>     term count, entry length (uvarints)
//	             history/id/<id>                   the entry's time and seq
//	             history/p/<time><seq>             promoted to project scope (the reason)
//	             history/f/<signature>             FailureMemory (approach + error pattern)
//	             history/stats                     entries and terms, for BM25
//	             (<time>: 12 bytes that sort as the entries' timestamps)
//	code         code/r/<root>                     totals of a work directory's index
//	             code/f/<root>\0<path>             CodeFile (what the file's version wrote, its content hash
//	                                               early in the record, read alone by a scan)
//	             code/t/<root>\0<name>\0<seg>      a name's lists of a segment (uvarints), in three sections, each but
//	                                               the last after its length, empty ones at the end left out:
//	                                               the term's postings: file index, count;
//	                                               the symbols it names (lower-cased): file index, line;
//	                                               the calls to it (the callee's last name, lower-cased): file index,
//	                                               the call's index in the file
//	             code/g/<root>\0<seg>              the names of the segment's lists, its live files
//	             code/gp/<root>\0<seg>             the segment's paths, one a line, a NUL, their lengths (uvarints)
//	             code/d/<root>\0<seg>\0<path>      a dead file of the segment (indexed since, or gone)
//	             code/i/<root>\0<import>\0<seg>    files of a segment importing a package: file index
//	             code/p/<root>\0<package>\0<seg>   files of a segment in a package: file index
//	             code/s/<root>\0<path>             why the file was skipped
//	             code/e/<root>\0<path>             the file's embed hash (the text its vector is of)
//	             (<root>: RootID of the work directory; <seg>: the seq of the index_update)
//	skills       skills/a/<sid>\0<agent>          Loadout: skills and tools loaded
//	pipelines    pipelines/p/<pipeline>            Pipeline (stages, loops, feedback, files)
//	             pipelines/g/<group>               VariantGroup
//	             pipelines/n/<dag>\0<node>         the node's variant group
//	vectors      vectors/e/<key>                   seq + recorded Embedding (key: schemas.EmbeddingKey)
//	             (the first record of a key stands; a second is refused)
//	plans        plans/s/<sid>                     PlanMode (a session's plan mode)
//	consults     consults/c/<sid>\0<request id>    Consult (one consultation)
//	docs         docs/n                            totals of the corpus (documents, chunks, terms, last seq)
//	             docs/d/<doc>                      DocRecord (the chunks' sections, hashes and terms)
//	             docs/c/<doc>\0<i>                 the text of chunk i (i: big-endian uint32)
//	             docs/e/<doc>\0<i>                 chunk i's embed hash (the text its vector is of)
//	             docs/t/<term>\0<doc>\0<i>         the term's count in chunk i and the chunk's length (uvarints)
//	             docs/s/<doc>                      a skipped file: its path, a newline, why
//	             (<doc>: DocID of the document's absolute path)
//	graph        graph/n/<node>                    GraphNodeRec: the node, its provenance and supersession
//	             graph/o/<from>\0<type>\0<to>      GraphEdgeRec: an edge, under its source
//	             graph/i/<to>\0<type>\0<from>      (empty) the same edge, under its target
//	             graph/t/<domain>\0<type>\0<node>  (empty) the nodes by domain and type
//	permits      permits/r/<sid>\0<id>             Permit: a permission request and its decision
//	             permits/id/<id>                   the request's session
//	             permits/g/<sid>\0<action>\0<grant>  PermitGrant: a remembered answer (<sid> empty: always)
//	schedules    schedules/s/<name>                Schedule: spec, state, failures, newest runs
//	             schedules/r/<sid>                 a firing's session -> its schedule
//	audit        audit/c/<category>\0<pos>         auditChunk: up to 32 entries (appendAuditEntry) in stream order
//	             audit/s/<sid>\0<pos>              auditChunk of postings (seq, time, category) by session
//	             audit/a/<agent>\0<pos>            ... by agent
//	             audit/o/<outcome>\0<pos>          ... by outcome, when not allowed
//	             audit/<dim>/<value>\0<pos>\x01      a segment of the list's open chunk: the items one flush added
//	             audit/c/<category>\0<pos>\x02<seq> an amendment: entry seq, completed after its chunk was written
//	             (<pos>: the first item's position, 8 bytes; <seq> 8 bytes)
//	             audit/call/<call>                 a tool call's entry and chunk until its result
//	every one    <name>/rej/<seq>                  Rejection
//	meta         meta/cursor/<name>, meta/version/<name>, meta/head
//	             meta/rebuild                      a rebuild started and not finished
//
// A projection whose version changed is dropped and rebuilt on [Open]; a Pebble
// directory that fails to open is moved aside and rebuilt; a store whose last
// folded event is not in the stream any more (the stream was replaced, or
// lost an unsynced tail) is rebuilt. A rebuild marks the store unfinished until
// it has folded the whole stream: a store opened with that mark (a rebuild
// interrupted at any point) is rebuilt again, and meanwhile Status shows the
// rebuild and Verify refuses the store. [Store.Verify] rebuilds into memory and
// compares key by key; [Store.SessionAsOf] folds one session's events up to a
// point (the session log makes that O(its events)).
//
// Sessions: any number may be active. The focused session is the one the
// last session_switch or session_resume went to; a switch{From} suspends From
// if it is active, so the switch is filed in From's log too.
//
// Durability: commits are not synced, except the last of a catch-up. The
// stream is the truth: a crash that loses the unsynced tail of the store loses
// state and cursor together, and the projector folds those events again.
//
// Throughput: a fold reads the stream undecoded (events.Raw) and decodes each
// event once, envelope and payload together, in one goroutine, folds in
// another and commits in a third; decoded objects are cached between batches,
// up to a budget of bytes (Options.CacheBytes), and encoded once per batch
// into reused buffers; a projection that started empty (a rebuild) never
// looks up a key it has not written; and since every memtable a fold flushes
// spans the whole key space, Pebble compacts level 0 at 8 sublevels rather
// than 4 (Options.L0CompactionThreshold).
//
// Reading: [Reader] is the query interface. [*Store] answers from its own Pebble;
// the api subpackage serves the same interface on sylk.api.> and gives clients a
// [Reader] over NATS.
package projections
