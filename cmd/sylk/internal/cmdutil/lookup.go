package cmdutil

import (
	"context"
	"errors"
	"fmt"

	"github.com/sylk/sylk/projections"
)

// ByIDOrNode reads an object by its id, or else the latest of those of a DAG
// node of that name (a pipeline, a variant group): users know their nodes'
// names better than generated ids. hint says how to list them.
func ByIDOrNode[T any](ctx context.Context, ref, hint string,
	get func(context.Context, string) (*T, error),
	list func(context.Context, projections.PipelineFilter) ([]*T, error)) (*T, error) {
	v, err := get(ctx, ref)
	if err == nil || !errors.Is(err, projections.ErrNotFound) {
		return v, err
	}
	all, lerr := list(ctx, projections.PipelineFilter{Node: ref})
	if lerr != nil {
		return nil, lerr
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%w (%s)", err, hint)
	}
	return all[len(all)-1], nil
}
