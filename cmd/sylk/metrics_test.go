package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sylk/sylk/broker"
	"github.com/sylk/sylk/broker/brokertest"
)

// TestMetrics runs a plan on `sylk serve --http` and scrapes /metrics with
// the Prometheus text parser: the tool runs, the events, the consumers, the
// dead letters and the projections' lag are the run's.
func TestMetrics(t *testing.T) {
	bin := sylkBinary(t)
	dir := t.TempDir()
	data, work := filepath.Join(dir, "data"), filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	os.WriteFile(filepath.Join(work, "plan.yaml"), []byte(`name: metrics
nodes:
  - {id: a, agent: engineer, tool: exec, args: {argv: ["true"]}}
  - {id: b, agent: engineer, tool: exec, args: {argv: ["true"]}, depends_on: [a]}
  - {id: c, agent: engineer, tool: exec, args: {argv: ["false"]}, depends_on: [b]}
`), 0o644)

	srv := startServe(t, bin, data, work, "--http", "127.0.0.1:0")
	defer srv.stop(t)
	info, err := broker.ReadInfo(data)
	if err != nil || info.HTTP == "" {
		t.Fatalf("server.json names no HTTP listener: %+v %v", info, err)
	}

	run := exec.Command(bin, "--data", data, "run", "plan.yaml")
	run.Dir = work
	if out, err := run.CombinedOutput(); run.ProcessState.ExitCode() != 3 {
		t.Fatalf("sylk run: want exit 3 (node c fails), got %v\n%s", err, out)
	}

	var fams map[string]*dto.MetricFamily
	brokertest.Eventually(t, 30*time.Second, "metrics of the finished run", func() bool {
		fams = scrape(t, info.HTTP+"/metrics")
		return value(fams, "sylk_tool_runs_total", "tool", "exec", "outcome", "failed") == 1 &&
			value(fams, "sylk_events_appended_total", "type", "workflow_complete") == 1 &&
			value(fams, "sylk_projection_lag_events") == 0 &&
			value(fams, "sylk_consumer_pending_messages", "consumer", "agent-orchestrator") == 0 &&
			value(fams, "sylk_consumer_ack_pending_messages", "consumer", "agent-engineer") == 0
	})
	if got := value(fams, "sylk_tool_runs_total", "tool", "exec", "outcome", "ok"); got != 2 {
		t.Errorf("exec runs ok: %v, want 2", got)
	}
	if got := value(fams, "sylk_events_appended_total", "type", "tool_result"); got != 3 {
		t.Errorf("tool_result events: %v, want 3", got)
	}
	if h := metric(fams, "sylk_tool_run_duration_seconds", "tool", "exec", "outcome", "ok"); h == nil || h.GetHistogram().GetSampleCount() != 2 {
		t.Errorf("exec durations: %v, want 2 samples", h)
	}
	if got := value(fams, "sylk_stream_messages", "stream", broker.DLQStream); got != 0 {
		t.Errorf("dead letters: %v", got)
	}
	if got := value(fams, "sylk_stream_last_sequence", "stream", broker.Stream); got < 10 {
		t.Errorf("SYLK last sequence %v: the run's events are missing", got)
	}
	if got := value(fams, "sylk_metrics_scrape_errors"); got != 0 {
		t.Errorf("scrape errors: %v", got)
	}
	if fams["go_goroutines"] == nil || fams["process_resident_memory_bytes"] == nil {
		t.Error("the Go and process collectors are missing")
	}
}

// scrape reads /metrics with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// metric finds the sample of a family whose labels include the pairs given.
func metric(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, or -1 when there is no such sample.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	m := metric(fams, name, labels...)
	switch {
	case m == nil:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	panic(fmt.Sprintf("%s is neither a counter nor a gauge", name))
}
