package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/render"
)

// runRecoveryCommand is agentfs run recovery: what a run left behind and
// the next safe request for each thing it left open (DESIGN §25).
func runRecoveryCommand() *command {
	return clientCommand(command{
		name:    "run recovery",
		summary: "what a dead run left open, and the next safe request for each",
		usage:   "agentfs run recovery RUN_ID [--limit N] [--cursor C] [--json]",
		help: `Prints, for a worker taking over a run whose worker died, what the run's
events confirm, each key its requests claimed (completed: nothing to redo;
in_progress: wait; abandoned: its worker died before anything was recorded,
so send the same request again with the same key), its upload sessions
with the parts still missing and its batches still running, then the next
actions in order, each with its exact request. All of it holds at one
event cursor (as_of). --json prints the whole answer (schema RunRecovery);
--limit and --cursor page the keys, newest first.

Examples:
  agentfs run recovery run-1
  agentfs run recovery run-1 --json
`}, false, runRecoveryFlags)
}

func runRecoveryFlags(fs *flag.FlagSet) verbFunc {
	limit := fs.Int("limit", 0, "keys per page (`N`, 1-1000; default 100)")
	cursor := fs.String("cursor", "", "the next_cursor of the page before (`C`)")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("run recovery needs one RUN_ID")
		}
		r, err := cli.client.RunRecovery(ctx, args[0], client.RecoveryOptions{Limit: *limit, Cursor: *cursor})
		if err != nil {
			if client.ErrorCode(err) == "NOT_FOUND" {
				return withNext(err, fmt.Sprintf("nothing of yours carries run id %s: no event, key, upload or batch, so nothing of it happened", args[0]))
			}
			return err
		}
		if cli.forcedJSON {
			enc := json.NewEncoder(cli.stdout)
			if cli.human {
				enc.SetIndent("", "  ")
			}
			return enc.Encode(r)
		}
		_, err = fmt.Fprint(cli.stdout, render.RecoveryText(*r))
		return err
	}
}
