package main

import (
	"github.com/spf13/cobra"

	auditcmd "github.com/sylk/sylk/cmd/sylk/audit"
	"github.com/sylk/sylk/cmd/sylk/bench"
	"github.com/sylk/sylk/cmd/sylk/config"
	"github.com/sylk/sylk/cmd/sylk/consumer"
	"github.com/sylk/sylk/cmd/sylk/dag"
	"github.com/sylk/sylk/cmd/sylk/dlq"
	"github.com/sylk/sylk/cmd/sylk/docs"
	"github.com/sylk/sylk/cmd/sylk/graph"
	"github.com/sylk/sylk/cmd/sylk/history"
	"github.com/sylk/sylk/cmd/sylk/hook"
	"github.com/sylk/sylk/cmd/sylk/index"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/cmd/sylk/permit"
	"github.com/sylk/sylk/cmd/sylk/pipeline"
	"github.com/sylk/sylk/cmd/sylk/plan"
	"github.com/sylk/sylk/cmd/sylk/projections"
	"github.com/sylk/sylk/cmd/sylk/publish"
	"github.com/sylk/sylk/cmd/sylk/replay"
	runcmd "github.com/sylk/sylk/cmd/sylk/run"
	"github.com/sylk/sylk/cmd/sylk/schedule"
	"github.com/sylk/sylk/cmd/sylk/schema"
	"github.com/sylk/sylk/cmd/sylk/search"
	"github.com/sylk/sylk/cmd/sylk/serve"
	"github.com/sylk/sylk/cmd/sylk/session"
	"github.com/sylk/sylk/cmd/sylk/signal"
	"github.com/sylk/sylk/cmd/sylk/skill"
	"github.com/sylk/sylk/cmd/sylk/stream"
	"github.com/sylk/sylk/cmd/sylk/tail"
	"github.com/sylk/sylk/cmd/sylk/usage"
	"github.com/sylk/sylk/cmd/sylk/user"
	"github.com/sylk/sylk/cmd/sylk/variant"
	"github.com/sylk/sylk/cmd/sylk/web"
)

// commands lists the top-level commands, one line a group: a new group is a
// package cmd/sylk/<group> with NewCmd<Group>, added here.
func commands(f *cmdutil.Factory) []*cobra.Command {
	return []*cobra.Command{
		serve.NewCmdServe(f, nil),
		web.NewCmdWeb(f),
		config.NewCmdConfig(f),
		runcmd.NewCmdRun(f),
		plan.NewCmdPlan(f),
		permit.NewCmdPermit(f),
		usage.NewCmdUsage(f),
		publish.NewCmdPublish(f, nil),
		tail.NewCmdTail(f, nil),
		consumer.NewCmdConsumer(f),
		schema.NewCmdSchema(f),
		bench.NewCmdBench(f),
		signal.NewCmdSignal(f),
		dlq.NewCmdDLQ(f),
		session.NewCmdSession(f),
		replay.NewCmdReplay(f),
		dag.NewCmdDAG(f),
		dag.NewCmdCheckpoint(f),
		history.NewCmdHistory(f),
		hook.NewCmdHook(f),
		projections.NewCmdProjections(f),
		index.NewCmdIndex(f),
		search.NewCmdSearch(f),
		docs.NewCmdDocs(f),
		graph.NewCmdGraph(f),
		skill.NewCmdSkill(f),
		user.NewCmdUser(f),
		auditcmd.NewCmdAudit(f),
		pipeline.NewCmdPipeline(f),
		variant.NewCmdVariant(f),
		stream.NewCmdStream(f),
		schedule.NewCmdSchedule(f),
	}
}
