package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/events/eventbench"
)

// newBenchWebViewersCmd is the process 'sylk bench web' starts for its
// viewers, once for the whole benchmark: one process reading every viewer's
// live stream, on one CPU, so that what the measured server shares its cores
// with is the viewers' reading and no more (no file written per event, no
// process per viewer, no process started per run). It keeps each viewer's
// event sequences in memory and answers the lines its parent writes on its
// standard input, each with a line on its standard output:
//
//	open URL     opens the viewers' streams of URL (/api/events): "open CPU"
//	FIRST LAST   waits (up to viewersWait) for every viewer to have every
//	             event of (FIRST, LAST], then answers the fewest any has
//	close        closes the streams: "closed CPU"
//
// CPU is the process's CPU time so far, in nanoseconds.
//
// It ends when its input does.
func newBenchWebViewersCmd() *cobra.Command {
	var token string
	var viewers int
	cmd := &cobra.Command{
		Use:    "web-viewers",
		Short:  "The live viewers of 'sylk bench web' (started by it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if viewers < 1 {
				return cmdutil.Usagef("--viewers %d: want at least 1", viewers)
			}
			runtime.GOMAXPROCS(1)
			return serveViewers(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), token, viewers, viewersWait)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the web view's bearer token")
	cmd.Flags().IntVar(&viewers, "viewers", 1, "viewers, each a connection of its own")
	return cmd
}

// viewersWait bounds how long the viewers are waited for to have a run's
// events: they keep up when they have them within it.
const viewersWait = 10 * time.Second

// serveViewers answers the lines of in (see newBenchWebViewersCmd) with
// viewers streams of the web view at a time, waiting up to wait for a
// run's events, until in ends.
func serveViewers(ctx context.Context, in io.Reader, out, stderr io.Writer, token string, viewers int, wait time.Duration) error {
	var g *viewerGroup
	defer func() {
		if g != nil {
			g.close()
		}
	}()
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		line := lines.Text()
		var answer string
		switch cmd, arg, _ := strings.Cut(line, " "); {
		case cmd == "open" && g == nil:
			var err error
			if g, err = openViewers(ctx, arg, token, viewers, stderr); err != nil {
				return err
			}
			answer = fmt.Sprintf("open %d", eventbench.ProcessCPU())
		case cmd == "close" && g != nil:
			g.close()
			g, answer = nil, fmt.Sprintf("closed %d", eventbench.ProcessCPU())
		default:
			var first, last uint64
			if _, err := fmt.Sscanf(line, "%d %d", &first, &last); err != nil || g == nil {
				return fmt.Errorf("web-viewers: %q: want open URL, FIRST LAST (while open) or close", line)
			}
			least, err := g.wait(ctx, first, last, wait)
			if err != nil {
				return err
			}
			answer = strconv.Itoa(least)
		}
		if _, err := fmt.Fprintln(out, answer); err != nil {
			return err
		}
	}
	return lines.Err()
}

// viewerGroup is the viewers' streams of one web view.
type viewerGroup struct {
	vs     []*sseViewer
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// got holds a signal once a viewer got events since the last wait
	// looked.
	got chan struct{}
}

// openViewers opens n streams of url, each read by a goroutine of its own,
// and returns once each has its response. A stream that ends before it is
// closed (the server dropped a viewer that fell behind) is said on stderr,
// and its events are missing from the counts.
func openViewers(ctx context.Context, url, token string, n int, stderr io.Writer) (*viewerGroup, error) {
	ctx, cancel := context.WithCancel(ctx)
	g := &viewerGroup{vs: make([]*sseViewer, n), cancel: cancel, got: make(chan struct{}, 1)}
	for i := range g.vs {
		v := &sseViewer{}
		body, err := v.open(ctx, url, token)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("viewer %d: %w", i, err)
		}
		g.vs[i] = v
		g.wg.Go(func() {
			defer body.Close()
			err := readIDs(body, 256<<10, func(seqs []uint64) error {
				defer signal(g.got)
				return v.add(seqs)
			})
			if ctx.Err() == nil {
				fmt.Fprintf(stderr, "web-viewers: viewer %d: the stream ended: %v\n", i, err)
			}
		})
	}
	return g, nil
}

// wait waits up to d for every viewer to have every event of (first,
// last], and returns the fewest of them any has.
func (g *viewerGroup) wait(ctx context.Context, first, last uint64, d time.Duration) (int, error) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		least := -1
		for _, v := range g.vs {
			if n := v.count(first, last); least < 0 || n < least {
				least = n
			}
		}
		if uint64(least) >= last-first {
			return least, nil
		}
		select {
		case <-g.got:
		case <-timeout.C:
			return least, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// close ends the streams and waits for their readers.
func (g *viewerGroup) close() {
	g.cancel()
	g.wg.Wait()
}

// signal leaves a signal in c unless one waits there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sseViewer reads one live stream as a browser's EventSource does and keeps
// the sequences (the "id:" field) of the events it got, as runs of
// consecutive ones: a few numbers per run of the benchmark, not one per
// event, so the viewers' process collects no garbage as events come.
type sseViewer struct {
	mu   sync.Mutex
	runs [][2]uint64 // first and last sequence of each run, in order
}

// open asks for url's stream and returns its body, once the response
// came.
func (v *sseViewer) open(ctx context.Context, url, token string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// add keeps the sequences of events the viewer got; the stream sends them
// in order, none twice, and one that does not is an error.
func (v *sseViewer) add(seqs []uint64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, seq := range seqs {
		n := len(v.runs)
		switch {
		case n > 0 && seq == v.runs[n-1][1]+1:
			v.runs[n-1][1] = seq
		case n > 0 && seq <= v.runs[n-1][1]:
			return fmt.Errorf("event %d after %d: want each once, in order", seq, v.runs[n-1][1])
		default:
			v.runs = append(v.runs, [2]uint64{seq, seq})
		}
	}
	return nil
}

// readIDs reads a stream of server-sent events in reads of up to size bytes
// and hands add the ids ("id:" lines) of each read's whole lines: the least
// a viewer can do per event, so that the viewers' process takes as little
// as it can of the CPUs the measured server runs on. A line longer than
// size is a data line, skipped. An error of add ends the reading.
func readIDs(r io.Reader, size int, add func([]uint64) error) error {
	buf := make([]byte, size)
	var ids []uint64
	held, inLine := 0, false // inLine: buf starts inside a line
	for {
		n, err := r.Read(buf[held:])
		held += n
		whole := bytes.LastIndexByte(buf[:held], '\n') + 1
		if whole > 0 {
			lines := buf[:whole]
			if inLine {
				lines = lines[bytes.IndexByte(lines, '\n')+1:]
				inLine = false
			}
			var perr error
			if ids, perr = sseIDs(ids[:0], lines); perr != nil {
				return perr
			}
			if len(ids) > 0 {
				if err := add(ids); err != nil {
					return err
				}
			}
			held = copy(buf, buf[whole:held])
		} else if held == len(buf) {
			held, inLine = 0, true
		}
		if err != nil {
			return err
		}
	}
}

// sseIDs appends to dst the ids of the "id: " lines in lines (whole lines).
func sseIDs(dst []uint64, lines []byte) ([]uint64, error) {
	for len(lines) > 0 {
		if rest, ok := bytes.CutPrefix(lines, []byte("id: ")); ok {
			id, after, _ := bytes.Cut(rest, []byte("\n"))
			seq, ok := parseSeq(id)
			if !ok {
				return dst, fmt.Errorf("id %q: not a stream sequence", id)
			}
			dst = append(dst, seq)
			lines = after
			continue
		}
		i := bytes.Index(lines, []byte("\nid: "))
		if i < 0 {
			break
		}
		lines = lines[i+1:]
	}
	return dst, nil
}

// parseSeq reads a stream sequence's decimal digits (strconv would want a
// string: an allocation per event).
func parseSeq(b []byte) (uint64, bool) {
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > (math.MaxUint64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, len(b) > 0
}

// count is how many of the viewer's events are in (first, last].
func (v *sseViewer) count(first, last uint64) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, r := range v.runs {
		if lo, hi := max(r[0], first+1), min(r[1], last); lo <= hi {
			n += int(hi - lo + 1)
		}
	}
	return n
}

// viewersProcess is the running 'sylk bench web-viewers' of a benchmark.
type viewersProcess struct {
	viewers int
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stopped sync.Once
	err     error
}

// startViewers starts the process of n viewers (of this executable), none
// open yet.
func startViewers(ctx context.Context, token string, n int) (*viewersProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "bench", "web-viewers", "--token", token, "--viewers", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench web: start the viewers: %w", err)
	}
	return &viewersProcess{viewers: n, cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// ask writes a line to the viewers and returns their answer.
func (p *viewersProcess) ask(line string) (string, error) {
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		return "", fmt.Errorf("bench web: ask the viewers %q: %w", line, err)
	}
	if !p.out.Scan() {
		return "", fmt.Errorf("bench web: the viewers ended: %w", p.stop())
	}
	return p.out.Text(), nil
}

// open opens the viewers' streams of url (/api/events); it returns the
// viewers' process's CPU time so far.
func (p *viewersProcess) open(url string) (time.Duration, error) {
	return p.cpuAnswer("open "+url, "open")
}

// close closes the viewers' streams; it returns the viewers' process's CPU
// time so far.
func (p *viewersProcess) close() (time.Duration, error) {
	return p.cpuAnswer("close", "closed")
}

// cpuAnswer asks line and reads the answer "WORD CPU".
func (p *viewersProcess) cpuAnswer(line, word string) (time.Duration, error) {
	a, err := p.ask(line)
	if err != nil {
		return 0, err
	}
	var cpu int64
	if _, err := fmt.Sscanf(a, word+" %d", &cpu); err != nil {
		return 0, fmt.Errorf("bench web: the viewers answered %q to %q", a, line)
	}
	return time.Duration(cpu), nil
}

// received waits (in the viewers' process, up to viewersWait) for every
// viewer to have every event of (first, last], and returns the fewest any
// has.
func (p *viewersProcess) received(first, last uint64) (int, error) {
	a, err := p.ask(fmt.Sprintf("%d %d", first, last))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(a)
}

// stop ends the viewers and waits for them.
func (p *viewersProcess) stop() error {
	p.stopped.Do(func() {
		p.in.Close()
		p.err = p.cmd.Wait()
	})
	return p.err
}
