//go:build unix

package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// procSpec is one subprocess to run.
type procSpec struct {
	argv  []string
	dir   string
	env   []string
	stdin []byte // nil: /dev/null
	base  time.Duration
	// rawLimit > 0 also keeps up to rawLimit bytes of stdout verbatim, for
	// tools that parse it.
	rawLimit int
	// hard > 0 caps the run time below Timeouts.Max, output or not.
	hard time.Duration
}

// procResult is what happened to it.
type procResult struct {
	pid         int // the process (and group) id; 0 when it did not start
	exitCode    int
	signal      string
	startErr    error // the process did not start
	timedOut    bool
	canceled    bool
	killSignals []string
	orphans     bool // processes left in its group after it exited were killed
	survivors   bool // something in the group outlived SIGKILL + KillWait
	stdout      *capture
	stderr      *capture
	raw         *rawBuf // stdout verbatim, when procSpec.rawLimit > 0
	duration    time.Duration
	base        time.Duration // the base timeout it ran with
	memLimit    int64         // the memory limit it ran under; 0: none
}

var errTimedOut = errors.New("tools: adaptive timeout")

// runProcess runs spec in its own process group and returns when the group
// is gone (or, for a process that cannot be killed, after KillWait), with
// every goroutine it started joined.
//
// Cancellation of ctx and the adaptive timeout both cancel the command's
// context; exec.Cmd.Cancel then starts the kill sequence on the group
// (SIGINT, SIGTERM after SIGINTGrace, SIGKILL after SIGTERMGrace more), and
// exec.Cmd.WaitDelay is the backstop that kills the leader if all else fails.
// When the leader exits on its own, anything it left in its group is killed.
//
// The output pipes are created here rather than by os/exec, so that Wait
// returns when the leader exits even if a grandchild still holds them; the
// readers are then bounded by a read deadline.
func (e *Executor) runProcess(ctx context.Context, spec procSpec) procResult {
	res := procResult{exitCode: -1, base: spec.base, stdout: newCapture(e.opts.Output, e.det), stderr: newCapture(e.opts.Output, e.det)}
	release, err := e.pool.Acquire(ctx)
	if err != nil {
		res.canceled, res.startErr = true, err
		return res
	}
	defer release()

	prog, err := lookPathIn(spec.argv[0], envValue(spec.env, "PATH"), spec.dir)
	if err != nil {
		res.startErr = err
		res.exitCode = startExitCode(err)
		return res
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		res.startErr = err
		return res
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		res.startErr = err
		return res
	}
	var inR, inW *os.File
	if spec.stdin != nil {
		if inR, inW, err = os.Pipe(); err != nil {
			closeAll(outR, outW, errR, errW)
			res.startErr = err
			return res
		}
	}

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	limit := memoryLimit(e.opts.liveMemoryLimit())
	cmd := exec.CommandContext(runCtx, prog)
	cmd.Args = spec.argv
	if limit > 0 {
		cmd.Path, cmd.Args = limitShim(limit, prog, spec.argv)
		res.memLimit = limit
	}
	cmd.Dir = spec.dir
	cmd.Env = spec.env
	cmd.Stdout, cmd.Stderr = outW, errW
	if inR != nil {
		cmd.Stdin = inR
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g := &group{cmd: cmd, killReq: make(chan struct{})}
	cmd.Cancel = g.interrupt
	k := e.opts.Kill
	cmd.WaitDelay = k.SIGINTGrace + k.SIGTERMGrace + k.KillWait

	start := time.Now()
	if err := cmd.Start(); err != nil {
		closeAll(outR, outW, errR, errW, inR, inW)
		res.startErr = err
		res.exitCode = startExitCode(err)
		res.canceled = ctx.Err() != nil
		return res
	}
	res.pid = cmd.Process.Pid
	closeAll(outW, errW, inR) // the child has its copies

	hard := e.opts.Timeouts.Max
	if spec.hard > 0 {
		hard = min(spec.hard, hard)
	}
	act := newActivity(start, spec.base, e.opts.Timeouts.ExtendOnOutput, hard, e.det)
	var wg sync.WaitGroup
	wg.Add(2)
	if spec.rawLimit > 0 {
		res.raw = &rawBuf{limit: spec.rawLimit}
	}
	obs := observerFrom(ctx)
	go e.readStream(&wg, outR, res.stdout, res.raw, act, obs.splitter(StreamStdout))
	go e.readStream(&wg, errR, res.stderr, nil, act, obs.splitter(StreamStderr))
	if inW != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = inW.Write(spec.stdin) // EPIPE when the child does not read it all
			_ = inW.Close()
		}()
	}
	leaderExited := make(chan struct{})
	supDone := make(chan struct{})
	var timedOut atomic.Bool
	go func() {
		defer close(supDone)
		e.supervise(g, act, leaderExited, func() {
			timedOut.Store(true)
			cancelRun(errTimedOut)
		})
	}()

	waitErr := cmd.Wait() // the outcome is read from ProcessState below
	res.duration = time.Since(start)
	close(leaderExited)
	<-supDone

	// The group is gone; the pipes reach EOF unless a process that left the
	// group holds them. Bound the wait for that case.
	deadline := time.Now().Add(k.KillWait)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	if inW != nil {
		_ = inW.SetWriteDeadline(deadline)
	}
	wg.Wait()
	closeAll(outR, errR)
	res.stdout.finish()
	res.stderr.finish()

	switch ws, ok := processStatus(cmd); {
	case !ok:
		// Someone else reaped the process (a wait for any child elsewhere
		// in this program): its status is lost.
		res.startErr = fmt.Errorf("lost the exit status: %w", waitErr)
	case ws.Signaled():
		res.signal = signalName(ws.Signal())
	default:
		res.exitCode = ws.ExitStatus()
	}
	res.killSignals, res.orphans, res.survivors = g.report()
	if g.interrupted.Load() {
		res.timedOut = timedOut.Load()
		res.canceled = !res.timedOut
	}
	if res.survivors {
		e.opts.Logger.Warn("tools: processes survived SIGKILL", "pgid", cmd.Process.Pid, "argv0", spec.argv[0])
	}
	return res
}

// shimShell applies the memory limit: Go cannot set a resource limit
// between fork and exec, and setting it on a child after Start would race
// with the child's first allocations (and miss what it forked meanwhile).
// The shell sets it on itself, then execs the program in the same process,
// so the pid, the process group and the kill sequence are unchanged. The
// program's argv[0] becomes its resolved path.
const shimShell = "/bin/sh"

// limitShim returns the path and argv that run argv (prog is its resolved
// program) under a data-segment limit of limit bytes. ulimit -d without -S
// or -H sets the hard limit too, so the program cannot raise it.
func limitShim(limit int64, prog string, argv []string) (string, []string) {
	kib := strconv.FormatInt(max(limit>>10, 1), 10)
	shim := []string{"sylk-memlimit", "-c", `ulimit -d "$1" && shift && exec "$@"`, "sylk-memlimit", kib, prog}
	return shimShell, append(shim, argv[1:]...)
}

// memoryLimit is the limit children get, in bytes: the configured one, or
// this process's own hard RLIMIT_DATA when that is lower (a child cannot
// raise it); 0 for no limit.
func memoryLimit(configured ByteSize) int64 {
	if configured < 0 {
		return 0 // unlimited: the inherited limit, if any, applies as it is
	}
	limit := uint64(configured)
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_DATA, &rl) == nil {
		limit = min(limit, rl.Max) // RLIM_INFINITY is the largest value
	}
	return int64(limit)
}

// MemoryLimitText says the memory limit each tool process runs under and
// how it is applied, for the server's start-up log.
func (o *Options) MemoryLimitText() string {
	configured := o.liveMemoryLimit()
	if configured == 0 {
		configured = DefaultMemoryLimit()
	}
	limit := memoryLimit(configured)
	if limit == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%s per process (rlimit RLIMIT_DATA, set by %s before the tool starts)", ByteSize(limit), shimShell)
}

func processStatus(cmd *exec.Cmd) (syscall.WaitStatus, bool) {
	if cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws, ok
}

// readStream copies a pipe into a capture, reports output to the adaptive
// timeout and hands lines to the call's observer, if any.
func (e *Executor) readStream(wg *sync.WaitGroup, r *os.File, c *capture, raw *rawBuf, act *activity, obs *splitter) {
	defer wg.Done()
	defer obs.finish()
	bp := e.bufs.Get().(*[]byte)
	defer e.bufs.Put(bp)
	buf := *bp
	w := lineWatch{a: act}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.Write(buf[:n])
			if raw != nil {
				raw.write(buf[:n])
			}
			w.observe(buf[:n])
			obs.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// supervise runs the adaptive timeout and the kill sequence of one process
// group. It returns when the leader exited and its group is gone, or after
// the kill sequence ended.
func (e *Executor) supervise(g *group, act *activity, leaderExited <-chan struct{}, timeout func()) {
	timer := time.NewTimer(act.deadline())
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			now := time.Since(act.start)
			if d := act.deadline(); now < d {
				timer.Reset(d - now)
				continue
			}
			timeout() // cancels the command's context: exec calls g.interrupt
		case <-g.killReq:
			e.killSequence(g)
			return
		case <-leaderExited:
			if g.interrupted.Load() {
				e.killSequence(g) // a cancel raced with the exit
				return
			}
			if g.alive() {
				g.mu.Lock()
				g.orphans = true
				g.mu.Unlock()
				g.signal(syscall.SIGKILL)
				g.waitGone(e.opts.Kill.KillWait)
			}
			return
		}
	}
}

// killSequence escalates after g.interrupt sent SIGINT.
func (e *Executor) killSequence(g *group) {
	k := e.opts.Kill
	if g.waitGone(k.SIGINTGrace) {
		return
	}
	e.opts.Logger.Debug("tools: process group ignored SIGINT", "pgid", g.pgid())
	g.signal(syscall.SIGTERM)
	if g.waitGone(k.SIGTERMGrace) {
		return
	}
	e.opts.Logger.Debug("tools: process group ignored SIGTERM", "pgid", g.pgid())
	g.signal(syscall.SIGKILL)
	if !g.waitGone(k.KillWait) {
		g.mu.Lock()
		g.survivors = true
		g.mu.Unlock()
	}
}

// group is the process group of one command; its id is the leader's pid.
type group struct {
	cmd         *exec.Cmd
	killReq     chan struct{}
	once        sync.Once
	interrupted atomic.Bool

	mu        sync.Mutex
	sent      []string
	gone      bool // observed empty: never signal this id again
	orphans   bool
	survivors bool
}

func (g *group) pgid() int { return g.cmd.Process.Pid }

// interrupt is the command's Cancel function: SIGINT to the whole group,
// then the supervisor takes over the escalation.
func (g *group) interrupt() error {
	g.once.Do(func() {
		g.interrupted.Store(true)
		g.signal(syscall.SIGINT)
		close(g.killReq)
	})
	return nil
}

// signal sends sig to every process of the group, unless the group was
// seen gone: its id could then belong to another group.
func (g *group) signal(sig syscall.Signal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pgid := g.pgid()
	if g.gone || pgid <= 0 {
		return
	}
	switch err := syscall.Kill(-pgid, sig); {
	case errors.Is(err, syscall.ESRCH):
		g.gone = true
	case err == nil:
		g.sent = append(g.sent, signalName(sig))
	}
}

// alive reports whether any process of the group still runs. Zombies do
// not count: they are dead, and only their parent (or init) can reap them.
func (g *group) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return false
	}
	pgid := g.pgid()
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) || !groupHasLive(pgid) {
		g.gone = true
		return false
	}
	return true
}

// waitGone polls until the group is gone or d has passed.
func (g *group) waitGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	step := 2 * time.Millisecond
	for {
		if !g.alive() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		time.Sleep(min(step, left))
		step = min(step*2, 50*time.Millisecond)
	}
}

func (g *group) report() (sent []string, orphans, survivors bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.orphans {
		sent = g.sent
	}
	return sent, g.orphans, g.survivors
}

// lookPathIn finds prog like a shell would, but in the child's PATH rather
// than this process's; a name with a slash is used as it is (relative to
// dir).
func lookPathIn(prog, path, dir string) (string, error) {
	if strings.Contains(prog, "/") {
		p := prog
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", &exec.Error{Name: prog, Err: err}
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would depend on the work directory
		}
		p := filepath.Join(d, prog)
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	return "", &exec.Error{Name: prog, Err: exec.ErrNotFound}
}

func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fs.ErrPermission
	}
	return nil
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// startExitCode maps a start failure to the exit code a shell reports.
func startExitCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission):
		return 126
	}
	return -1
}

// startErrorText explains a start failure to a person or an LLM.
func startErrorText(argv0 string, err error) string {
	switch startExitCode(err) {
	case 127:
		return fmt.Sprintf("command not found: %q is not a program in PATH or an existing file (check the spelling, or run it through a shell with \"shell\": true if it is a shell builtin)", argv0)
	case 126:
		return fmt.Sprintf("cannot execute %q: permission denied or not an executable file", argv0)
	}
	return fmt.Sprintf("cannot start %q: %v", argv0, err)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
