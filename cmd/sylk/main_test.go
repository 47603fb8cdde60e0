package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rogpeppe/go-internal/testscript"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/sylk/sylk/broker/brokertest"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

func TestMain(m *testing.M) {
	testscript.Main(removingBinary{m}, map[string]func(){
		"sylk": func() { os.Exit(run(os.Args[1:], cmdutil.DefaultIO())) },
	})
}

// removingBinary runs the tests, then removes the binaries buildBinary built
// (each run builds its own: left behind, they fill the disk).
type removingBinary struct{ *testing.M }

func (m removingBinary) Run() int {
	defer func() {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
	}()
	return m.M.Run()
}

// TestScripts runs the CLI acceptance scripts in testdata/script: each reads like
// a shell session against a real sylk binary and a real embedded server.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("SYLK_DATA", filepath.Join(env.WorkDir, "data"))
			env.Setenv("HOME", env.WorkDir)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
			env.Setenv("NO_COLOR", "1")
			// The LLM tier is configured only where a script says so.
			for _, v := range []string{"SYLK_LLM_BASE_URL", "SYLK_LLM_MODEL", "SYLK_LLM_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
				"SYLK_LLM_BUDGET_GLOBAL", "SYLK_LLM_BUDGET_SESSION", "SYLK_LLM_BUDGET_TASK"} {
				env.Setenv(v, "")
			}
			env.Values[fakeLLMKey{}] = &fakeLLM{}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":     cmdWaitFile,
			"extconsume":   cmdExtConsume,
			"extpublish":   cmdExtPublish,
			"waitconsumer": cmdWaitConsumer,
			"waitdlq":      cmdWaitDLQ,
			"llmserve":     cmdLLMServe,
			"llmcalls":     cmdLLMCalls,
			"embedcalls":   cmdEmbedCalls,
			"waitidle":     cmdWaitIdle,
			"waitsub":      cmdWaitSub,
			"jsonfield":    cmdJSONField,
			"filemode":     cmdFileMode,
			"greptree":     cmdGrepTree,
			"extpubas":     cmdExtPubAs,
			"natsjs":       cmdNatsJS,
		},
		RequireExplicitExec: true,
	})
}

// jsonfield FILE FIELD VAR: set VAR to the string FIELD of the first JSON
// value in FILE (an id a later command needs); FIELD is a dotted path whose
// steps are object keys or list indexes (requests.0.id).
func cmdJSONField(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 || neg {
		ts.Fatalf("usage: jsonfield FILE FIELD VAR")
	}
	var v any
	if err := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0]))).Decode(&v); err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	for step := range strings.SplitSeq(args[1], ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[step]
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("%s: %q of %s: not an index of a list of %d", args[0], step, args[1], len(x))
			}
			v = x[i]
		default:
			v = nil
		}
	}
	s, ok := v.(string)
	if !ok {
		ts.Fatalf("%s has no string %q", args[0], args[1])
	}
	ts.Setenv(args[2], s)
}

// filemode FILE MODE: FILE's permission bits are MODE (octal).
func cmdFileMode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: filemode FILE MODE")
	}
	fi, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := fmt.Sprintf("%04o", fi.Mode().Perm()); got != args[1] {
		ts.Fatalf("%s has mode %s, want %s", args[0], got, args[1])
	}
}

// greptree DIR TEXT: some file under DIR holds TEXT (with !: none does).
func cmdGrepTree(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: greptree DIR TEXT")
	}
	var found []string
	ts.Check(filepath.WalkDir(ts.MkAbs(args[0]), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(args[1])) {
			found = append(found, path)
		}
		return nil
	}))
	switch {
	case neg && len(found) > 0:
		ts.Fatalf("%q is in %v", args[1], found)
	case !neg && len(found) == 0:
		ts.Fatalf("no file under %s holds %q", args[0], args[1])
	}
}

// waitfile FILE [SECONDS]: poll until FILE exists (a server's server.json).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitfile FILE [SECONDS]")
	}
	limit := 30 * time.Second
	if len(args) == 2 {
		s, _ := strconv.Atoi(args[1])
		limit = time.Duration(s) * time.Second
	}
	path := ts.MkAbs(args[0])
	if !brokertest.Poll(limit, func() bool { _, err := os.Stat(path); return (err == nil) != neg }) {
		ts.Fatalf("%s: exists=%v after %s", path, neg, limit)
	}
}

// extconsume DATADIR CONSUMER SCHEMAFILE N: an outside client that knows nothing
// of Sylk's Go code. It reads server.json for the URL, binds the durable
// consumer with plain nats.go, fetches N messages, decodes each msgpack body
// generically, validates it against the published JSON Schema and prints
// "seq type session text" per message.
func cmdExtConsume(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 4 {
		ts.Fatalf("usage: extconsume DATADIR CONSUMER SCHEMAFILE N")
	}
	n, _ := strconv.Atoi(args[3])

	doc, err := os.ReadFile(ts.MkAbs(args[2]))
	ts.Check(err)
	docv, err := sjs.UnmarshalJSON(bytes.NewReader(doc))
	ts.Check(err)
	c := sjs.NewCompiler()
	ts.Check(c.AddResource("mem://s.json", docv))
	schema, err := c.Compile("mem://s.json")
	ts.Check(err)

	js, ctx, done := extJetStream(ts, args[0], 30*time.Second)
	defer done()
	cons, err := js.Consumer(ctx, "SYLK", args[1])
	ts.Check(err)
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	ts.Check(err)
	got := 0
	for m := range batch.Messages() {
		var body map[string]any
		ts.Check(msgpack.Unmarshal(m.Data(), &body))
		j, err := json.Marshal(body)
		ts.Check(err)
		v, err := sjs.UnmarshalJSON(bytes.NewReader(j))
		ts.Check(err)
		if err := schema.Validate(v); err != nil {
			ts.Fatalf("message %s fails the published schema: %v", j, err)
		}
		md, _ := m.Metadata()
		payload, _ := body["payload"].(map[string]any)
		fmt.Fprintf(ts.Stdout(), "%d %v %v %v %s\n", md.Sequence.Stream, body["type"], body["session_id"], payload["text"], m.Headers().Get("Sylk-Type"))
		ts.Check(m.Ack())
		got++
	}
	ts.Check(batch.Error())
	if got != n {
		ts.Fatalf("fetched %d messages, want %d", got, n)
	}
}

// extpublish DATADIR SUBJECT DATA: an outside client publishes raw bytes to the
// stream with plain nats.go and waits for the stream's ack.
func cmdExtPublish(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: extpublish DATADIR SUBJECT DATA")
	}
	js, ctx, done := extJetStream(ts, args[0], 30*time.Second)
	defer done()
	_, err := js.Publish(ctx, args[1], []byte(args[2]))
	ts.Check(err)
}

// extpubas DATADIR CREDS|- SUBJECT [N]: an outside client with that .creds
// file (- for none) publishes to the server of DATADIR (N times, on one
// connection); it fails when the server refuses the connection or a
// publish, printing why.
func cmdExtPubAs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 && len(args) != 4 {
		ts.Fatalf("usage: extpubas DATADIR CREDS|- SUBJECT [N]")
	}
	n := 1
	if len(args) == 4 {
		var err error
		if n, err = strconv.Atoi(args[3]); err != nil || n < 1 {
			ts.Fatalf("extpubas: N %q: want a positive count", args[3])
		}
	}
	var info struct {
		URL string `json:"url"`
	}
	b, err := os.ReadFile(filepath.Join(ts.MkAbs(args[0]), "server.json"))
	ts.Check(err)
	ts.Check(json.Unmarshal(b, &info))
	var opts []nats.Option
	if args[1] != "-" {
		opts = append(opts, nats.UserCredentials(ts.MkAbs(args[1])))
	}
	err = func() error {
		nc, err := nats.Connect(info.URL, opts...)
		if err != nil {
			return err
		}
		defer nc.Close()
		for range n {
			if err := nc.Publish(args[2], []byte("x")); err != nil {
				return err
			}
		}
		// A refused publish is reported before the flush's answer.
		if err := nc.Flush(); err != nil {
			return err
		}
		return nc.LastError()
	}()
	if err != nil {
		fmt.Fprintln(ts.Stderr(), err)
	}
	if (err != nil) != neg {
		ts.Fatalf("extpubas %s %s: %v", args[1], args[2], err)
	}
}

// natsJSDir holds the nats.js observer script and its npm packages, which
// `make natsjs` installs (with node itself when it is missing).
const natsJSDir = "testdata/natsjs"

// natsjs DATADIR CREDS SESSION: the nats.js observer script (see
// testdata/natsjs/observer.mjs) against the server of DATADIR with that .creds
// file; it fails when the script does (it read nothing, or its publish was
// accepted).
func cmdNatsJS(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: natsjs DATADIR CREDS SESSION")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		ts.Fatalf("node is not installed: run 'make natsjs' (it installs node and the nats package): %v", err)
	}
	dir, err := filepath.Abs(natsJSDir)
	ts.Check(err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "nats", "package.json")); err != nil {
		ts.Fatalf("the nats npm package is not installed in %s: run 'make natsjs': %v", dir, err)
	}
	var info struct {
		URL string `json:"url"`
	}
	b, err := os.ReadFile(filepath.Join(ts.MkAbs(args[0]), "server.json"))
	ts.Check(err)
	ts.Check(json.Unmarshal(b, &info))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "observer.mjs", info.URL, ts.MkAbs(args[1]), args[2])
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
	err = cmd.Run()
	if (err != nil) != neg {
		ts.Fatalf("node observer.mjs: %v", err)
	}
}

// extJetStream is extConnect with a JetStream context and a deadline for the
// command's requests; done closes the connection.
func extJetStream(ts *testscript.TestScript, dataDir string, within time.Duration) (jetstream.JetStream, context.Context, func()) {
	nc := extConnect(ts, dataDir)
	js, err := jetstream.New(nc)
	ts.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	return js, ctx, func() { cancel(); nc.Close() }
}

// extConnect connects to the server of a data directory the way any NATS client
// would: the URL and the credentials file from server.json.
func extConnect(ts *testscript.TestScript, dataDir string) *nats.Conn {
	var info struct {
		URL   string `json:"url"`
		Creds string `json:"creds"`
	}
	b, err := os.ReadFile(filepath.Join(ts.MkAbs(dataDir), "server.json"))
	ts.Check(err)
	ts.Check(json.Unmarshal(b, &info))
	nc, err := nats.Connect(info.URL, nats.UserCredentials(info.Creds))
	ts.Check(err)
	return nc
}

// waitconsumer DATADIR FILTER: poll until the SYLK stream has a consumer with
// that filter subject (a background tail is ready).
func cmdWaitConsumer(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitconsumer DATADIR FILTER")
	}
	js, ctx, done := extJetStream(ts, args[0], 30*time.Second)
	defer done()
	found := brokertest.Poll(30*time.Second, func() bool {
		s, err := js.Stream(ctx, "SYLK")
		ts.Check(err)
		lister := s.ListConsumers(ctx)
		for info := range lister.Info() {
			if info.Config.FilterSubject == args[1] || slices.Contains(info.Config.FilterSubjects, args[1]) {
				return true
			}
		}
		return false
	})
	if !found {
		ts.Fatalf("no consumer on %s within 30s", args[1])
	}
}

// waitdlq DATADIR N: poll until the dead-letter stream holds N messages.
func cmdWaitDLQ(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: waitdlq DATADIR N")
	}
	want, _ := strconv.ParseUint(args[1], 10, 64)
	js, ctx, done := extJetStream(ts, args[0], 30*time.Second)
	defer done()
	var have uint64
	reached := brokertest.Poll(30*time.Second, func() bool {
		s, err := js.Stream(ctx, "SYLK_DLQ")
		ts.Check(err)
		info, err := s.Info(ctx)
		ts.Check(err)
		have = info.State.Msgs
		return have >= want
	})
	if !reached {
		ts.Fatalf("%d dead letters after 30s, want %d", have, want)
	}
}
