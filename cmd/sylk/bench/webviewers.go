package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
)

// newBenchWebViewersCmd is the process 'sylk bench web' starts for its
// viewers: one process reading every viewer's live stream, on one CPU, so
// that what the measured server shares its cores with is the viewers'
// reading and no more (no file written per event, no process per viewer).
// It keeps each viewer's event sequences in memory and answers the
// questions its parent writes on its standard input, a line "FIRST LAST"
// each: the fewest events of (FIRST, LAST] any viewer has, on a line of its
// standard output. It ends when its input does.
func newBenchWebViewersCmd() *cobra.Command {
	var url, token string
	var viewers int
	cmd := &cobra.Command{
		Use:    "web-viewers",
		Short:  "The live viewers of 'sylk bench web' (started by it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if viewers < 1 || url == "" {
				return cmdutil.Usagef("want --url and --viewers of at least 1")
			}
			runtime.GOMAXPROCS(1)
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			vs := make([]*sseViewer, viewers)
			errs := make(chan error, viewers)
			var wg sync.WaitGroup
			for i := range vs {
				vs[i] = &sseViewer{}
				wg.Go(func() {
					if err := vs[i].read(ctx, url, token); err != nil && ctx.Err() == nil {
						errs <- fmt.Errorf("viewer %d: %w", i, err)
						cancel()
					}
				})
			}
			defer wg.Wait()
			return answerCounts(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), vs, errs, cancel)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the live stream's URL (/api/events)")
	cmd.Flags().StringVar(&token, "token", "", "the web view's bearer token")
	cmd.Flags().IntVar(&viewers, "viewers", 1, "viewers, each a connection of its own")
	return cmd
}

// answerCounts answers each "FIRST LAST" line of in with the fewest events
// of (FIRST, LAST] any of vs has, until in ends or a viewer fails.
func answerCounts(ctx context.Context, in io.Reader, out io.Writer, vs []*sseViewer, errs <-chan error, stop func()) error {
	defer stop()
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		var first, last uint64
		if _, err := fmt.Sscanf(lines.Text(), "%d %d", &first, &last); err != nil {
			return fmt.Errorf("web-viewers: %q: want FIRST LAST: %w", lines.Text(), err)
		}
		least := -1
		for _, v := range vs {
			if n := v.count(first, last); least < 0 || n < least {
				least = n
			}
		}
		if _, err := fmt.Fprintln(out, least); err != nil {
			return err
		}
		select {
		case err := <-errs:
			return err
		default:
		}
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return lines.Err()
}

// sseViewer reads one live stream as a browser's EventSource does and keeps
// the sequence (the "id:" field) of every event it got.
type sseViewer struct {
	mu   sync.Mutex
	seqs []uint64
}

func (v *sseViewer) read(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return readIDs(resp.Body, 256<<10, func(seqs []uint64) {
		v.mu.Lock()
		v.seqs = append(v.seqs, seqs...)
		v.mu.Unlock()
	})
}

// readIDs reads a stream of server-sent events in reads of up to size bytes
// and hands add the ids ("id:" lines) of each read's whole lines: the least
// a viewer can do per event, so that the viewers' process takes as little
// as it can of the CPUs the measured server runs on. A line longer than
// size is a data line, skipped.
func readIDs(r io.Reader, size int, add func([]uint64)) error {
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
				add(ids)
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

// count is how many of the viewer's events are in (first, last]: the stream
// sends them in order, none twice.
func (v *sseViewer) count(first, last uint64) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	lo, _ := slices.BinarySearch(v.seqs, first+1)
	hi, _ := slices.BinarySearch(v.seqs, last+1)
	return hi - lo
}

// viewersProcess is the running 'sylk bench web-viewers' of a run.
type viewersProcess struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Scanner
	stopped sync.Once
	err     error
}

// startViewers starts n viewers of url in one process of this executable.
func startViewers(ctx context.Context, url, token string, n int) (*viewersProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "bench", "web-viewers", "--url", url, "--token", token, "--viewers", strconv.Itoa(n))
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
	return &viewersProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

// minReceived is the fewest events of (first, last] any viewer has.
func (p *viewersProcess) minReceived(first, last uint64) (int, error) {
	if _, err := fmt.Fprintf(p.in, "%d %d\n", first, last); err != nil {
		return 0, fmt.Errorf("bench web: ask the viewers: %w", err)
	}
	if !p.out.Scan() {
		return 0, fmt.Errorf("bench web: the viewers ended: %w", p.stop())
	}
	return strconv.Atoi(p.out.Text())
}

// stop ends the viewers and waits for them.
func (p *viewersProcess) stop() error {
	p.stopped.Do(func() {
		p.in.Close()
		p.err = p.cmd.Wait()
	})
	return p.err
}
