package tools

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// DefaultUserReservedPercent is the share of a Pool kept for the user's own
// requests (seed L6828-6947: every pool reserves 20% for user-interactive
// work).
const DefaultUserReservedPercent = 20

// DefaultMaxProcesses is the default size of a server's Pool: two tool
// processes per CPU (seed L6860: max 2 × N_CPU_CORES).
func DefaultMaxProcesses() int { return 2 * runtime.NumCPU() }

// Pool bounds the tool processes running at once, over every executor that
// shares it (a server has one for all its sessions and work directories).
// Part of it is reserved for the user's own requests (a context marked with
// ForUser): other work may not take the last Reserved slots, so a user's
// command never waits behind scheduled or background work, only behind the
// user's own. It is safe for concurrent use.
type Pool struct {
	mu        sync.Mutex
	size      int
	reserved  int
	user, bg  int           // slots in use, by lane
	changed   chan struct{} // closed and replaced when a slot frees or the limits change
	waitingBG int
	memory    ByteSize // per-process memory limit set live (0: the executor's own)
}

// NewPool returns a pool of size slots, reserved of them for the user's own
// requests. See SetLimits for the bounds.
func NewPool(size, reserved int) (*Pool, error) {
	p := &Pool{changed: make(chan struct{})}
	if err := p.SetLimits(size, reserved); err != nil {
		return nil, err
	}
	return p, nil
}

// ReservedFor is the number of slots DefaultUserReservedPercent keeps for the
// user out of size: at least one when the pool has two slots or more.
func ReservedFor(size int) int {
	r := size * DefaultUserReservedPercent / 100
	if r == 0 && size >= 2 {
		r = 1
	}
	return r
}

// CheckPoolLimits reports pool limits SetLimits refuses: size must be at
// least 1 and reserved in [0, size), so that other work can run at all.
func CheckPoolLimits(size, reserved int) error {
	if size < 1 {
		return fmt.Errorf("max_processes must be at least 1, got %d", size)
	}
	if reserved < 0 || reserved >= size {
		return fmt.Errorf("user_reserved %d must be at least 0 and below max_processes %d, so other work can run", reserved, size)
	}
	return nil
}

// SetLimits changes the pool's size and reserve, live: processes running
// keep their slots, and a smaller pool takes no new work until enough of
// them end. See CheckPoolLimits for the bounds.
func (p *Pool) SetLimits(size, reserved int) error {
	if err := CheckPoolLimits(size, reserved); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size, p.reserved = size, reserved
	p.wakeLocked()
	return nil
}

// SetMemoryLimit changes, live, the memory limit of each tool process the
// executors sharing this pool start from now on (as Options.MemoryLimit:
// -1 unlimited; 0 each executor's own); processes running keep theirs.
func (p *Pool) SetMemoryLimit(limit ByteSize) error {
	if err := CheckMemoryLimit(limit); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.memory = limit
	return nil
}

// memoryLimit is the limit SetMemoryLimit set (0: none set).
func (p *Pool) memoryLimit() ByteSize {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.memory
}

// Limits returns the pool's size and reserve.
func (p *Pool) Limits() (size, reserved int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size, p.reserved
}

// PoolUsage is a pool's state at one moment.
type PoolUsage struct {
	Size, Reserved int
	// User and Other are the slots in use by the user's requests and by
	// other work; WaitingOther the other work waiting for a slot.
	User, Other, WaitingOther int
}

// Usage returns the pool's state.
func (p *Pool) Usage() PoolUsage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolUsage{Size: p.size, Reserved: p.reserved, User: p.user, Other: p.bg, WaitingOther: p.waitingBG}
}

// Acquire takes a slot for a process, waiting while none is free to the
// caller's lane (ForUser(ctx) or not) or until ctx ends. The returned func
// gives the slot back; call it once.
func (p *Pool) Acquire(ctx context.Context) (release func(), err error) {
	user := IsForUser(ctx)
	p.mu.Lock()
	if !user {
		p.waitingBG++
	}
	for !p.freeLocked(user) {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			if !user {
				p.waitingBG--
			}
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		p.mu.Lock()
	}
	if user {
		p.user++
	} else {
		p.waitingBG--
		p.bg++
	}
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if user {
				p.user--
			} else {
				p.bg--
			}
			p.wakeLocked()
		})
	}, nil
}

// freeLocked reports whether a slot is free to the lane: the user's requests
// take any free slot; other work leaves the reserve free, less what the user
// already holds (seed L6947).
func (p *Pool) freeLocked(user bool) bool {
	if user {
		return p.user+p.bg < p.size
	}
	return p.bg+max(p.user, p.reserved) < p.size
}

func (p *Pool) wakeLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// userKey marks a context whose tool processes are the user's own requests.
type userKey struct{}

// ForUser marks ctx as the user's own request: its tool processes may use
// the slots a Pool reserves for the user.
func ForUser(ctx context.Context) context.Context { return context.WithValue(ctx, userKey{}, true) }

// IsForUser reports whether ctx was marked by ForUser.
func IsForUser(ctx context.Context) bool { return ctx.Value(userKey{}) != nil }
