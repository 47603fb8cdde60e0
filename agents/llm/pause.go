package llm

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sylk/sylk/agents"
	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/schemas"
)

// MetaRateLimit marks the pause and resume signals of a rate-limit episode
// (its value is the provider), so a restarted client recognises a pause its
// predecessor could not end.
const MetaRateLimit = "llm_rate_limit"

// resumeTimeout bounds appending the end of a pause.
const resumeTimeout = 10 * time.Second

// pauser turns rate-limit pauses of the gate into signal events: a pause of
// everything (scope all) when the first 429 of an episode arrives, with the
// time it should end, and a resume when the gate's pause is over (a later 429
// extends it). The runner holds every session's queued work meanwhile, so
// tool work and LLM work wait together (seed L4003), and `sylk tail` shows
// why.
//
// It never takes over a pause it did not make: with a global pause already
// in effect it appends none, and it resumes only if its pause is still the
// last global signal. A resume of everything also lifts the pauses of single
// sessions (the runner's rule), so the resume is appended with a fresh pause
// of each session that was paused, in one atomic batch.
type pauser struct {
	c *Client

	mu     sync.Mutex
	open   *episode
	timer  *time.Timer
	closed bool
	wg     sync.WaitGroup
}

// episode is one pause of the gate.
type episode struct {
	log *events.Log
	ctx context.Context // the starting call's, without its cancellation
	// pause is the signal appended; nil when none was (a global pause was in
	// effect already): there is then nothing to resume.
	pause *schemas.Envelope
}

// begin pauses the gate until until and, for the first 429 of an episode,
// appends the pause signal.
func (p *pauser) begin(ctx context.Context, d *agents.Delivery, key string, until time.Time, reason string) {
	started := p.c.gate.pause(until)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.open == nil && started {
		ep := &episode{log: d.Log(), ctx: context.WithoutCancel(ctx)}
		p.open = ep
		if fold, err := foldSignals(ctx, d.Log()); err != nil {
			p.c.log.Warn("llm rate limit: cannot read the signals; not appending a pause", "err", err)
		} else if !fold.allPaused {
			env, err := d.DeriveSession(schemas.SystemSession, schemas.TypeSignal, "orchestrator", "llm_pause/"+key, schemas.Signal{
				Action: schemas.SignalPause, Scope: schemas.ScopeAll, Reason: reason, ResumeAt: until.UTC(),
			})
			if err == nil {
				env.Metadata = map[string]string{MetaRateLimit: p.c.conf().Provider}
				if _, err = d.AppendNow(ctx, env); err == nil {
					ep.pause = env
				}
			}
			if err != nil {
				p.c.log.Warn("llm rate limit: pause signal not appended", "err", err)
			}
		}
	}
	p.armLocked()
}

func (p *pauser) armLocked() {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(max(0, p.c.gate.pausedUntil().Sub(p.c.now())), p.fire)
}

// fire ends the episode when the gate's pause is over.
func (p *pauser) fire() {
	p.mu.Lock()
	if p.closed || p.open == nil {
		p.mu.Unlock()
		return
	}
	if p.c.now().Before(p.c.gate.pausedUntil()) {
		p.armLocked() // extended by a later 429
		p.mu.Unlock()
		return
	}
	ep := p.open
	p.open, p.timer = nil, nil
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	p.resume(ep)
}

// close ends an open episode at once and waits for a resume in progress.
func (p *pauser) close() error {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	ep := p.open
	p.open = nil
	p.mu.Unlock()
	var err error
	if ep != nil {
		err = p.resume(ep)
	}
	p.wg.Wait()
	return err
}

// resume appends the end of ep's pause, if it is still the pause in effect.
func (p *pauser) resume(ep *episode) error {
	if ep.pause == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ep.ctx, resumeTimeout)
	defer cancel()
	err := resumePause(ctx, ep.log, ep.pause, p.c.now(), "the LLM rate limit is over")
	if err != nil {
		p.c.log.Warn("llm rate limit: resume not appended; 'sylk signal resume' ends the pause", "err", err)
	}
	return err
}

// resumePause appends a resume of pause (a global pause signal), with a pause
// again of each session that was paused on its own, unless another global
// signal came after pause.
func resumePause(ctx context.Context, log *events.Log, pause *schemas.Envelope, now time.Time, reason string) error {
	fold, err := foldSignals(ctx, log)
	if err != nil {
		return err
	}
	if fold.lastAll == nil || fold.lastAll.ID != pause.ID {
		return nil
	}
	res, err := pause.Derive(schemas.TypeSignal, pause.Source, "orchestrator", now, schemas.Signal{Action: schemas.SignalResume, Scope: schemas.ScopeAll, Reason: reason})
	if err != nil {
		return err
	}
	res.ID = schemas.DeriveID(pause, "llm_resume")
	res.Metadata = pause.Metadata
	out := []*schemas.Envelope{res}
	for _, s := range fold.pausedSessions() {
		again, err := res.Derive(schemas.TypeSignal, pause.Source, "orchestrator", now, schemas.Signal{
			Action: schemas.SignalPause, Scope: schemas.ScopeSession, Reason: "still paused: the end of an LLM rate-limit pause resumes only what it paused",
		})
		if err != nil {
			return err
		}
		again.ID = schemas.DeriveID(res, "repause/"+s)
		again.SessionID = s
		out = append(out, again)
	}
	return appendAll(ctx, log, out)
}

// ResumeStalePause ends a rate-limit pause a previous process left behind (it
// stopped before its resume): if the last global signal is such a pause and
// its resume time has passed, it appends the resume. Call it at start-up.
func (c *Client) ResumeStalePause(ctx context.Context, log *events.Log) error {
	fold, err := foldSignals(ctx, log)
	if err != nil {
		return err
	}
	last := fold.lastAll
	if !fold.allPaused || last == nil || last.Metadata[MetaRateLimit] == "" {
		return nil
	}
	p, err := schemas.PayloadAs[schemas.Signal](last)
	if err != nil {
		return err
	}
	if c.now().Before(p.ResumeAt) {
		// Its resume time is still ahead: wait for it in the gate too.
		c.gate.pause(p.ResumeAt)
		c.pauses.mu.Lock()
		if c.pauses.open == nil && !c.pauses.closed {
			c.pauses.open = &episode{log: log, ctx: context.WithoutCancel(ctx), pause: last}
			c.pauses.armLocked()
		}
		c.pauses.mu.Unlock()
		return nil
	}
	return resumePause(ctx, log, last, c.now(), "a rate-limit pause left by a stopped process")
}

// signalFold is the state the signals so far leave, by the runner's rules.
type signalFold struct {
	allPaused bool
	lastAll   *schemas.Envelope // the last signal of scope all
	sessions  map[string]bool   // sessions paused on their own
}

func (f *signalFold) pausedSessions() []string {
	var out []string
	for s, paused := range f.sessions {
		if paused {
			out = append(out, s)
		}
	}
	return out
}

func foldSignals(ctx context.Context, log *events.Log) (*signalFold, error) {
	f := &signalFold{sessions: map[string]bool{}}
	err := log.Scan(ctx, events.Filter{Type: schemas.TypeSignal}.Subject(), events.Cursor{}, 0, func(ev *events.Event) error {
		if ev.Env == nil {
			return nil
		}
		p, err := schemas.PayloadAs[schemas.Signal](ev.Env)
		if err != nil {
			return nil
		}
		all := p.Scope == schemas.ScopeAll
		switch p.Action {
		case schemas.SignalPause:
			if all {
				f.allPaused = true
			} else {
				f.sessions[ev.Env.SessionID] = true
			}
		case schemas.SignalResume:
			if all {
				f.allPaused = false
				clear(f.sessions)
			} else {
				delete(f.sessions, ev.Env.SessionID)
			}
		default:
			return nil
		}
		if all {
			f.lastAll = ev.Env
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read signals: %w", err)
	}
	return f, nil
}
