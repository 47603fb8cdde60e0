package librarian

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/sylk/sylk/events"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// UpdateEvents turns updates into index_update events of session from
// source, addressed to the user as every record is (so the Guide does not
// route them), each with an id derived from its content (the root and every
// path with its hash or its removal or skip): recording the same update
// twice appends it once.
func UpdateEvents(session, source string, now time.Time, updates []schemas.IndexUpdate) ([]*schemas.Envelope, error) {
	return updateEvents(session, source, now, updates, updateID)
}

// updateEvents turns updates into index_update events with the ids id
// gives them.
func updateEvents(session, source string, now time.Time, updates []schemas.IndexUpdate, id func(*schemas.Envelope, *schemas.IndexUpdate) string) ([]*schemas.Envelope, error) {
	out := make([]*schemas.Envelope, 0, len(updates))
	for _, u := range updates {
		env, err := schemas.New(schemas.TypeIndexUpdate, session, source, "user", now, u)
		if err != nil {
			return nil, err
		}
		env.ID = id(env, &u)
		out = append(out, env)
	}
	return out, nil
}

// updateID derives an event id from what an update says.
func updateID(env *schemas.Envelope, u *schemas.IndexUpdate) string {
	h := sha256.New()
	h.Write([]byte(u.Root))
	for _, f := range u.Files {
		h.Write([]byte("\x00f" + f.Path + "\x00" + f.Hash))
	}
	for _, r := range u.Removed {
		h.Write([]byte("\x00r" + r))
	}
	for _, s := range u.Skipped {
		h.Write([]byte("\x00s" + s.Path + "\x00" + s.Reason))
	}
	return schemas.DeriveID(&schemas.Envelope{ID: hex.EncodeToString(h.Sum(nil)), Timestamp: env.Timestamp}, "index_update")
}

// Record appends updates as events, pipelined, and returns the stream
// sequence of the last (0 when there are none). The events get fresh ids: a
// command that indexes again on purpose (a rebuild) is not a duplicate.
func Record(ctx context.Context, log *events.Log, session, source string, now time.Time, updates []schemas.IndexUpdate) (uint64, error) {
	envs, err := updateEvents(session, source, now, updates, func(*schemas.Envelope, *schemas.IndexUpdate) string { return schemas.NewID() })
	if err != nil {
		return 0, err
	}
	return log.AppendPipelined(ctx, envs)
}

// Name is the Librarian's agent name.
const Name = "librarian"

// Update brings the index of ix's root up to date: the whole tree, or only
// files when some are named. record appends updates (as events) and
// returns the sequence of the last; a scan of the tree calls it with each
// update as soon as it is made, so the events are recorded, and folded,
// while the rest of the tree is read, and an update is not kept once it is
// recorded (a first index's updates hold every file's symbols and terms,
// which the collector would otherwise mark again and again until the scan
// ends). Update returns what the updates did and the last sequence (0:
// nothing changed).
func Update(ctx context.Context, r projections.Reader, ix *Indexer, files []string, record func(context.Context, []schemas.IndexUpdate) (uint64, error)) (Counts, uint64, error) {
	// Named files need what the index holds of them alone, not of the tree.
	rels, err := ix.Rels(files)
	if err != nil {
		return Counts{}, 0, err
	}
	known, err := KnownFrom(ctx, r, ix.Root, rels...)
	if err != nil {
		return Counts{}, 0, err
	}
	var n Counts
	if len(files) > 0 {
		ups, err := ix.Paths(ctx, known, rels)
		if err != nil || len(ups) == 0 {
			return Counts{}, 0, err
		}
		for _, u := range ups {
			n.add(&u)
		}
		seq, err := record(ctx, ups)
		return n, seq, err
	}
	defer projections.TuneGC(ix.GCPercent, 0)()
	var last uint64
	err = ix.ScanEach(ctx, known, func(u schemas.IndexUpdate) error {
		seq, err := record(ctx, []schemas.IndexUpdate{u})
		n.add(&u)
		last = max(last, seq)
		return err
	})
	return n, last, err
}

// Counts is what updates did: the index_update events, and the files
// indexed, removed and skipped.
type Counts struct {
	Events, Indexed, Removed, Skipped int
}

func (n *Counts) add(u *schemas.IndexUpdate) {
	n.Events++
	n.Indexed += len(u.Files)
	n.Removed += len(u.Removed)
	n.Skipped += len(u.Skipped)
}
