package agents

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sylk/sylk/schemas"
)

// job is one fetched message waiting for, or in, a worker.
type job struct {
	msg       jetstream.Msg
	md        *jetstream.MsgMetadata
	env       *schemas.Envelope
	decodeErr error
	session   string

	mu     sync.Mutex
	cancel context.CancelFunc
}

func (j *job) setCancel(c context.CancelFunc) {
	j.mu.Lock()
	j.cancel = c
	j.mu.Unlock()
}

func (j *job) cancelRun() {
	j.mu.Lock()
	if j.cancel != nil {
		j.cancel()
	}
	j.mu.Unlock()
}

// scheduler hands jobs to workers fairly: sessions take turns, none runs more
// than perSession jobs at once, and a paused session's jobs wait (held, not
// lost) until it is resumed.
type scheduler struct {
	mu         sync.Mutex
	cond       *sync.Cond
	queues     map[string][]*job
	ring       []string // sessions in turn order
	turn       int
	running    map[string]int
	inflight   map[*job]struct{}
	perSession int
	closed     bool
}

func newScheduler(perSession int) *scheduler {
	s := &scheduler{queues: map[string][]*job{}, running: map[string]int{}, inflight: map[*job]struct{}{}, perSession: perSession}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// push decodes a fetched message and queues it under its session.
func (s *scheduler) push(_ context.Context, r *Runner, m jetstream.Msg) {
	j := &job{msg: m}
	md, err := m.Metadata()
	if err != nil {
		r.opts.Logger.Warn("message without metadata", "agent", r.opts.Agent, "err", err)
		m.Term()
		return
	}
	j.md = md
	j.env, j.decodeErr = schemas.Unmarshal(m.Data())
	if j.env != nil {
		j.session = j.env.SessionID
	} else {
		j.session = sessionOf(m.Subject())
	}
	// A signal addressed to this agent takes effect as it arrives, before
	// the work behind it in the stream is queued: the signal tail may lag.
	if sig, ok := envSignal(j.env, md.Sequence.Stream); ok && r.signals.apply(sig) {
		r.onSignal(sig)
	}
	s.mu.Lock()
	if _, ok := s.queues[j.session]; !ok {
		s.ring = append(s.ring, j.session)
	}
	s.queues[j.session] = append(s.queues[j.session], j)
	s.mu.Unlock()
	s.cond.Signal()
}

// next blocks until a job may run, and returns it; false once closed.
func (s *scheduler) next(sig *signalState) (*job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return nil, false
		}
		if j := s.pick(sig); j != nil {
			return j, true
		}
		s.cond.Wait()
	}
}

// pick takes the next runnable job, going round the sessions from the one after
// the last served. Caller holds mu.
func (s *scheduler) pick(sig *signalState) *job {
	for i := range s.ring {
		idx := (s.turn + i) % len(s.ring)
		sess := s.ring[idx]
		q := s.queues[sess]
		if len(q) == 0 || s.running[sess] >= s.perSession {
			continue
		}
		j := q[0]
		if sig.holds(j) {
			continue
		}
		s.queues[sess] = q[1:]
		s.running[sess]++
		s.inflight[j] = struct{}{}
		s.turn = idx + 1
		if len(s.queues[sess]) == 0 && s.running[sess] == 0 {
			s.forget(sess, idx)
		}
		return j
	}
	return nil
}

// forget drops an idle session from the ring. Caller holds mu.
func (s *scheduler) forget(sess string, idx int) {
	delete(s.queues, sess)
	delete(s.running, sess)
	s.ring = append(s.ring[:idx], s.ring[idx+1:]...)
	if s.turn > idx {
		s.turn--
	}
}

func (s *scheduler) done(j *job) {
	s.mu.Lock()
	delete(s.inflight, j)
	// Only a session that was at its limit has jobs this makes runnable: wake
	// the workers then, not after every job.
	wasFull := s.running[j.session] >= s.perSession && len(s.queues[j.session]) > 0
	s.running[j.session]--
	if s.running[j.session] <= 0 && len(s.queues[j.session]) == 0 {
		for i, sess := range s.ring {
			if sess == j.session {
				s.forget(sess, i)
				break
			}
		}
	}
	s.mu.Unlock()
	if wasFull {
		s.cond.Broadcast()
	}
}

// wake re-evaluates held jobs after a signal.
func (s *scheduler) wake() { s.cond.Broadcast() }

// cancelInFlight cancels the running handlers a cancel signal covers.
func (s *scheduler) cancelInFlight(sig signalEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j := range s.inflight {
		if (sig.Scope == schemas.ScopeAll || j.session == sig.Session) && j.md.Sequence.Stream <= sig.Seq {
			j.cancelRun()
		}
	}
}

// queued returns the jobs waiting for a worker.
func (s *scheduler) queued() []*job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*job
	for _, q := range s.queues {
		out = append(out, q...)
	}
	return out
}

// held returns every job this process holds unacked: queued and running.
func (s *scheduler) held() []*job {
	out := s.queued()
	s.mu.Lock()
	defer s.mu.Unlock()
	for j := range s.inflight {
		out = append(out, j)
	}
	return out
}

func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// drain empties the queues and returns what was in them.
func (s *scheduler) drain() []*job {
	out := s.queued()
	s.mu.Lock()
	s.queues, s.ring = map[string][]*job{}, nil
	s.mu.Unlock()
	return out
}
