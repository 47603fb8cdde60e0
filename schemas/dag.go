package schemas

import (
	"fmt"
	"slices"
	"strings"
)

// NodeLabel names a DAG node in a message: by id, or by position when it has
// none.
func NodeLabel(i int, id string) string {
	if id == "" {
		return fmt.Sprintf("node #%d", i+1)
	}
	return fmt.Sprintf("node %q", id)
}

// Shape checks a DAG's structure, the part every reader of a DAG relies on:
// nodes with legal, unique ids, dependencies that name other nodes, once each,
// and no cycle. When the structure is sound it returns the node ids by
// longest-path layer (a node's layer is one more than its deepest
// dependency's; order within a layer follows the DAG); otherwise every problem,
// naming the node. Agents, tools and policy are checked by the plan validator.
func (d *DAG) Shape() (layers [][]string, problems []string) {
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(d.Nodes) == 0 {
		add("the DAG has no nodes")
	}
	// The node's label is built only for a problem: every DAG a projection
	// folds is checked here, and nearly all are sound.
	index := make(map[string]int, len(d.Nodes))
	for i, n := range d.Nodes {
		switch {
		case n.ID == "":
			add("%s: id is missing", NodeLabel(i, n.ID))
		case !ValidName(n.ID):
			add("%s: id must be 1-64 of A-Z a-z 0-9 _ -", NodeLabel(i, n.ID))
		default:
			if first, dup := index[n.ID]; dup {
				add("%s: duplicate id (also node #%d)", NodeLabel(i, n.ID), first+1)
			} else {
				index[n.ID] = i
			}
		}
	}
	for i, n := range d.Nodes {
		for j, dep := range n.DependsOn {
			if slices.Contains(n.DependsOn[:j], dep) {
				add("%s: depends_on lists %s more than once", NodeLabel(i, n.ID), dep)
				continue
			}
			if _, ok := index[dep]; dep == n.ID {
				add("%s: depends on itself", NodeLabel(i, n.ID))
			} else if !ok {
				add("%s: depends on %q, which is not a node", NodeLabel(i, n.ID), dep)
			}
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	layerOf := make(map[string]int, len(d.Nodes))
	// Kahn's algorithm in definition order: a node's layer is known once all
	// its dependencies' are.
	for progress := true; progress && len(layerOf) < len(d.Nodes); {
		progress = false
		for _, n := range d.Nodes {
			if _, done := layerOf[n.ID]; done {
				continue
			}
			l, ready := 0, true
			for _, dep := range n.DependsOn {
				dl, ok := layerOf[dep]
				if !ok {
					ready = false
					break
				}
				l = max(l, dl+1)
			}
			if ready {
				layerOf[n.ID] = l
				progress = true
			}
		}
	}
	if len(layerOf) < len(d.Nodes) {
		return nil, []string{"dependency cycle: " + d.cycle(layerOf)}
	}
	for _, n := range d.Nodes {
		l := layerOf[n.ID]
		for len(layers) <= l {
			layers = append(layers, nil)
		}
		layers[l] = append(layers[l], n.ID)
	}
	return layers, nil
}

// cycle finds a dependency cycle among the nodes not placed in a layer and
// shows it in the direction work flows: a -> b means b depends on a.
func (d *DAG) cycle(placed map[string]int) string {
	deps := make(map[string][]string, len(d.Nodes))
	for _, n := range d.Nodes {
		deps[n.ID] = n.DependsOn
	}
	const (
		unseen = iota
		onPath
		finished
	)
	color := map[string]int{}
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		color[id] = onPath
		path = append(path, id)
		for _, dep := range deps[id] {
			if _, ok := placed[dep]; ok {
				continue
			}
			switch color[dep] {
			case onPath:
				i := slices.Index(path, dep)
				return append(slices.Clone(path[i:]), dep)
			case unseen:
				if c := visit(dep); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[id] = finished
		return nil
	}
	for _, n := range d.Nodes {
		if _, ok := placed[n.ID]; ok || color[n.ID] != unseen {
			continue
		}
		if c := visit(n.ID); c != nil {
			slices.Reverse(c)
			return strings.Join(c, " -> ")
		}
	}
	return "(not found)"
}
