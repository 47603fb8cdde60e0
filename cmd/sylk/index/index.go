// Package index is `sylk index`: the Librarian's code index of a work
// directory, brought up to date, shown, or recorded again.
package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sylk/sylk/agents/librarian"
	"github.com/sylk/sylk/cmd/sylk/internal/cmdutil"
	"github.com/sylk/sylk/projections"
	"github.com/sylk/sylk/schemas"
)

// IndexOptions are the flags of `sylk index`.
type IndexOptions struct {
	Dir     string
	Session string
	JSON    bool
	Limit   int
}

func (o *IndexOptions) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "the work directory")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
}

func NewCmdIndex(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "The Librarian's code index of a work directory: update, status, rebuild",
		Long: `The Librarian indexes a work directory without an LLM: every file's terms (for
ranked full-text search), and for Go the packages, declarations, calls and
imports. Files are compared by content hash, so an update reads the tree and
records only what changed, as index_update events; the index is a projection
of those events ('sylk projections rebuild' folds it again without reading a
file). Sensitive files (.env, keys, credentials) are indexed by name only and
secrets are redacted before anything is extracted. Binary, huge, unreadable
and symlinked files are skipped, each with its reason ('sylk index status').

'sylk search' updates the index before it searches; the Librarian updates it
before it answers a context request.`,
	}
	cmd.AddCommand(newUpdateCmd(f), newStatusCmd(f), newRebuildCmd(f), newWatchCmd(f))
	return cmd
}

func newUpdateCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &IndexOptions{}
	cmd := &cobra.Command{
		Use:   "update [FILE...]",
		Short: "Index what changed in the work directory (or only the named files)",
		Long: `Reads the work directory (--dir) and records what changed since the last
update, as index_update events. Named files are read alone: each must be under
the work directory, and is named relative to the current directory, as a shell
completes it. A named file that no longer exists is recorded as removed if the
index knows it; one the index does not know either is an error.`,
		Example: `  sylk index update
  sylk index update --dir ~/src/app
  sylk index update internal/config/loader.go   # one edited file, as an editor hook would
  sylk index update --dir app app/main.go        # a file is named from the current directory`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return updateRun(cmd.Context(), f, opts, args, false)
		},
	}
	opts.bind(cmd)
	cmd.Flags().StringVar(&opts.Session, "session", "_", "the session the index_update events belong to")
	return cmd
}

func newRebuildCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &IndexOptions{}
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Read and record every file of the work directory again",
		Long: `Extracts every file again, whatever its content hash, and records it: what an
upgrade of the extractor needs. To fold the recorded events again without
reading any file, use 'sylk projections rebuild'.`,
		Example: `  sylk index rebuild --dir .`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return updateRun(cmd.Context(), f, opts, nil, true)
		},
	}
	opts.bind(cmd)
	cmd.Flags().StringVar(&opts.Session, "session", "_", "the session the index_update events belong to")
	return cmd
}

// updateReport is what update and rebuild print with --json.
type updateReport struct {
	Root    string `json:"root"`
	Indexed int    `json:"indexed"`
	Removed int    `json:"removed"`
	Skipped int    `json:"skipped"`
	Events  int    `json:"events"`
	Seq     uint64 `json:"seq,omitempty"`
	// Changed lists the files a watcher saw change.
	Changed []string `json:"changed,omitempty"`
}

func updateRun(ctx context.Context, f *cmdutil.Factory, opts *IndexOptions, files []string, reindex bool) error {
	if !schemas.ValidName(opts.Session) {
		return cmdutil.Usagef("--session %q is not a session id", opts.Session)
	}
	ix, err := librarian.NewIndexer(opts.Dir)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	ix.Reindex = reindex
	for i, p := range files {
		if files[i], err = filepath.Abs(p); err != nil {
			return err
		}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := checkNamed(ctx, r, ix, files); err != nil {
		return err
	}
	n, seq, err := Refresh(ctx, f, r, ix, opts.Session, files)
	if err != nil {
		return err
	}
	return report(f, opts, ix, n, seq, nil)
}

// checkNamed refuses a named file that does not exist unless the index
// knows it (its update records the removal): the path is most likely
// mistyped, or named from --dir instead of from the current directory.
func checkNamed(ctx context.Context, r *cmdutil.StateReader, ix *librarian.Indexer, files []string) error {
	var gone []string
	for _, p := range files {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, p)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	rels, err := ix.Rels(gone)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	known, err := librarian.KnownFrom(ctx, r, ix.Root, rels...)
	if err != nil {
		return err
	}
	for i, rel := range rels {
		if known.Hashes[rel] == "" && known.Skipped[rel] == "" {
			return cmdutil.Usagef("%s: no such file, and the index of %s does not know it (a file is named from the current directory, not from --dir)", gone[i], ix.Root)
		}
	}
	return nil
}

// report prints what one update recorded (one JSON object a line with
// --json); paths, when set, are the files a watcher saw change.
func report(f *cmdutil.Factory, opts *IndexOptions, ix *librarian.Indexer, n librarian.Counts, seq uint64, paths []string) error {
	rep := updateReport{Root: ix.Root, Indexed: n.Indexed, Removed: n.Removed, Skipped: n.Skipped, Events: n.Events, Seq: seq, Changed: paths}
	if opts.JSON {
		return f.IO.PrintJSON(rep)
	}
	if n.Events == 0 {
		fmt.Fprintf(f.IO.Out, "%s: the index is up to date\n", ix.Root)
		return nil
	}
	fmt.Fprintf(f.IO.Out, "%s: %d files indexed, %d removed, %d skipped (%d index_update events)\n", ix.Root, rep.Indexed, rep.Removed, rep.Skipped, rep.Events)
	if rep.Skipped > 0 {
		fmt.Fprintln(f.IO.ErrOut, "'sylk index status' says why each skipped file was left out")
	}
	return nil
}

func newWatchCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &IndexOptions{}
	var debounce time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Keep the index of the work directory up to date as files change",
		Long: `Brings the index up to date, then watches the work directory (every directory
the indexer enters; symlinks are not followed) and indexes the files that
change, once no change came for --debounce: an edit records one
index_update naming that file, a removed file is removed from the index, a
new directory is watched and its files indexed. It prints a line per update
(a JSON object per line with --json) and runs until Ctrl-C (exit 0).`,
		Example: `  sylk index watch
  sylk index watch --dir ~/src/app --debounce 500ms --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return watchRun(cmd.Context(), f, opts, debounce)
		},
	}
	opts.bind(cmd)
	cmd.Flags().StringVar(&opts.Session, "session", "_", "the session the index_update events belong to")
	cmd.Flags().DurationVar(&debounce, "debounce", librarian.DefaultDebounce, "how long to wait after the last change before indexing")
	return cmd
}

func watchRun(ctx context.Context, f *cmdutil.Factory, opts *IndexOptions, debounce time.Duration) error {
	if !schemas.ValidName(opts.Session) {
		return cmdutil.Usagef("--session %q is not a session id", opts.Session)
	}
	if debounce <= 0 {
		return cmdutil.Usagef("--debounce %s: want a positive duration, e.g. 200ms", debounce)
	}
	ix, err := librarian.NewIndexer(opts.Dir)
	if err != nil {
		return cmdutil.UsageError{Err: err}
	}
	r, err := f.State(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	n, seq, err := Refresh(ctx, f, r, ix, opts.Session, nil)
	if err != nil {
		return err
	}
	if err := report(f, opts, ix, n, seq, nil); err != nil {
		return err
	}
	return ix.Watch(ctx, debounce, func(ctx context.Context, paths []string) error {
		n, seq, err := Refresh(ctx, f, r, ix, opts.Session, paths)
		if err != nil {
			return err
		}
		if n.Events == 0 {
			return nil // touched, not changed
		}
		return report(f, opts, ix, n, seq, paths)
	}, func(err error) { fmt.Fprintf(f.IO.ErrOut, "watch: %v\n", err) })
}

// Refresh brings the index of ix's root up to date (only files, when some
// are named), recording the updates in session, and makes r's answers
// reflect them. A command's process does nothing else while it scans the
// tree, so the scan runs with the collector settings of one
// (librarian.CommandGCPercent).
func Refresh(ctx context.Context, f *cmdutil.Factory, r *cmdutil.StateReader, ix *librarian.Indexer, session string, files []string) (librarian.Counts, uint64, error) {
	ix.GCPercent = librarian.CommandGCPercent
	n, seq, err := librarian.Update(ctx, r, ix, files, func(ctx context.Context, ups []schemas.IndexUpdate) (uint64, error) {
		return librarian.Record(ctx, r.Log, session, "user", f.Now(), ups)
	})
	if err != nil {
		return librarian.Counts{}, 0, err
	}
	if seq > 0 {
		if err := r.Sync(ctx, seq); err != nil {
			return librarian.Counts{}, 0, err
		}
		if rej, err := r.Rejected(ctx, seq); err == nil && rej != nil {
			return librarian.Counts{}, 0, fmt.Errorf("the code index refused the update at seq %d: %s", seq, rej.Reason)
		}
	}
	return n, seq, nil
}

func newStatusCmd(f *cmdutil.Factory) *cobra.Command {
	opts := &IndexOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "What the index of the work directory holds, and which files it skipped and why",
		Example: `  sylk index status
  sylk index status --dir ~/src/app --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, err := librarian.NewIndexer(opts.Dir)
			if err != nil {
				return cmdutil.UsageError{Err: err}
			}
			r, err := f.State(cmd.Context())
			if err != nil {
				return err
			}
			defer r.Close()
			res, err := r.Code(cmd.Context(), projections.CodeQuery{Root: ix.Root, Kind: projections.CodeStatus, Limit: opts.Limit})
			if err != nil {
				return err
			}
			if opts.JSON {
				return f.IO.PrintJSON(res)
			}
			if !res.Indexed {
				fmt.Fprintf(f.IO.ErrOut, "%s has no index yet: 'sylk index update --dir %s' makes one\n", ix.Root, opts.Dir)
				return nil
			}
			st := res.Status
			fmt.Fprintf(f.IO.Out, "%s: %d files, %d terms, last update at seq %d\n", ix.Root, st.Files, st.Length, st.Seq)
			if st.SkippedTotal > 0 {
				fmt.Fprintf(f.IO.Out, "%d skipped:\n", st.SkippedTotal)
				tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
				for _, s := range st.Skipped {
					fmt.Fprintf(tw, "  %s\t%s\n", s.Path, s.Reason)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if st.SkippedTotal > len(st.Skipped) {
					fmt.Fprintf(f.IO.Out, "  … and %d more (--limit)\n", st.SkippedTotal-len(st.Skipped))
				}
			}
			return nil
		},
	}
	opts.bind(cmd)
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "list at most N skipped files")
	return cmd
}
