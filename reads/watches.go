package reads

import (
	"context"

	"github.com/agentfs/agentfs"
)

// A watch follows the event feed on the caller's behalf (an MCP resource
// subscription of the /mcp door): making one needs what reading the feed
// needs, and each is the caller's subject's alone.

// Watch records that the caller's session watches w.Path, from the end of
// the caller's feed now on (w.After is set here). A session watching
// agentfs.MaxWatchesPerSession paths is agentfs.ErrTooManyWatches.
func (g *Gate) Watch(ctx context.Context, who agentfs.Caller, w agentfs.Watch) (agentfs.Watch, error) {
	start, err := g.EventsStart(ctx, who)
	if err != nil {
		return w, err
	}
	w.After = start
	return w, g.store.AddWatch(ctx, who.Subject, w)
}

// Unwatch ends the caller's session's watch of path.
func (g *Gate) Unwatch(ctx context.Context, who agentfs.Caller, session, path string) error {
	if err := who.Allow(agentfs.OpListEvents); err != nil {
		return err
	}
	return g.store.RemoveWatch(ctx, who.Subject, session, path)
}

// Watches lists what the caller's session watches.
func (g *Gate) Watches(ctx context.Context, who agentfs.Caller, session string) ([]agentfs.Watch, error) {
	if err := who.Allow(agentfs.OpListEvents); err != nil {
		return nil, err
	}
	return g.store.Watches(ctx, who.Subject, session)
}

// TouchWatches renews the caller's session's watches: they are kept while
// the session is seen.
func (g *Gate) TouchWatches(ctx context.Context, who agentfs.Caller, session string) error {
	if err := who.Allow(agentfs.OpListEvents); err != nil {
		return err
	}
	return g.store.TouchWatches(ctx, who.Subject, session)
}

// EndWatches drops every watch of the caller's session (it ended).
func (g *Gate) EndWatches(ctx context.Context, who agentfs.Caller, session string) error {
	_, err := g.store.EndWatches(ctx, who.Subject, session)
	return err
}
