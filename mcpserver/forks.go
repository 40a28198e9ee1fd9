package mcpserver

import (
	"cmp"
	"context"
	"fmt"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/render"
)

// ForksBackend is what the tools of forks and merges need (DESIGN §19).
type ForksBackend interface {
	// Fork copies the folder from (as of asOf; "" is now) to the folder
	// to, as new files sharing their blobs.
	Fork(ctx context.Context, from, to, asOf string) (*Fork, error)
	// Merge merges a fork back into its source, or plans it with dryRun.
	Merge(ctx context.Context, forkID, onConflict string, dryRun bool) (*Merge, error)
}

// Fork is a fork as the API shows it.
type Fork = api.Fork

// Merge is a merge as the API shows it.
type Merge = api.Merge

// Fork makes a fork through the admission core.
func (b *CoreBackend) Fork(ctx context.Context, from, to, asOf string) (*Fork, error) {
	who, err := b.writer(ctx, client.NewIdempotencyKey())
	if err != nil {
		return nil, err
	}
	spec, err := agentfs.ParsePoint("as_of", cmp.Or(asOf, "now"), who.Subject)
	if err != nil {
		return nil, problemOfCore(err)
	}
	if err := agentfs.CheckForkPrefixes(from, to); err != nil {
		return nil, problemOfCore(err)
	}
	res, err := b.Core.CreateFork(ctx, who, agentfs.NewFork{From: from, To: to, AsOf: spec})
	var f Fork
	return &f, decodeResult(res.Status, res.Body, err, &f)
}

// Merge merges or plans a merge through the admission core.
func (b *CoreBackend) Merge(ctx context.Context, forkID, onConflict string, dryRun bool) (*Merge, error) {
	who, err := b.writer(ctx, client.NewIdempotencyKey())
	if err != nil {
		return nil, err
	}
	req := agentfs.MergeRequest{ForkID: forkID, OnConflict: cmp.Or(onConflict, agentfs.OnConflictFail), DryRun: dryRun}
	if dryRun {
		m, err := b.Core.PlanMerge(ctx, who, req)
		if err != nil {
			return nil, problemOfCore(err)
		}
		out := render.Merge(who.Subject, m)
		return &out, nil
	}
	res, err := b.Core.Merge(ctx, who, req)
	var m Merge
	return &m, decodeResult(res.Status, res.Body, err, &m)
}

// Fork makes a fork (POST /v1/forks).
func (cb *ClientBackend) Fork(ctx context.Context, from, to, asOf string) (*Fork, error) {
	key := client.NewIdempotencyKey()
	f, err := cb.c.CreateFork(ctx, from, to, client.ForkOptions{AsOf: asOf, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return f, nil
}

// Merge merges a fork or plans the merge (POST /v1/forks/{id}/merge).
func (cb *ClientBackend) Merge(ctx context.Context, forkID, onConflict string, dryRun bool) (*Merge, error) {
	key := client.NewIdempotencyKey()
	m, err := cb.c.Merge(ctx, forkID, client.MergeOptions{OnConflict: onConflict, DryRun: dryRun, IdempotencyKey: key})
	if err != nil {
		return nil, problemOf(err, key)
	}
	return m, nil
}

// mergeText is what the merge tool says of m.
func mergeText(m *Merge) string {
	verb := "Merged"
	if m.DryRun {
		verb = "A merge would apply"
	}
	s := fmt.Sprintf("%s %s from fork %s.\n", verb, count(len(m.Applied), "change"), m.ForkID)
	for _, ch := range m.Applied {
		s += ch.Change + " " + ch.Path + "\n"
	}
	for _, c := range m.Conflicts {
		won := "unresolved"
		if c.Resolution != nil {
			won = "kept the " + *c.Resolution + "'s side"
		}
		s += "conflict " + c.Path + ": " + won + "\n"
	}
	return s
}
