package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentfs/agentfs/client"
)

// webhookCommand is agentfs webhook: make, list, remove webhooks, read
// their delivery logs, replay them from a cursor and rotate their secrets.
func webhookCommand() *command {
	return &command{
		name:    "webhook",
		summary: "signed webhooks of your events: webhook create, ls, rm, deliveries, replay, rotate",
		usage: `agentfs webhook create URL [--type TYPE]... [--prefix PREFIX] [--run ID] [--description TEXT]
agentfs webhook ls
agentfs webhook rm ID
agentfs webhook deliveries ID [--limit N]
agentfs webhook replay ID --after CURSOR|start|now
agentfs webhook rotate ID`,
		help: `A webhook POSTs each of your matching events to a URL, in feed order, at
least once, signed the Standard Webhooks way (webhook-id, webhook-timestamp,
webhook-signature) with its secret, which create prints once. A receiver
that is down gets every event once it is up again; after about a day of
failures (or a 410) the webhook is disabled (docs/webhooks.md).

Examples:
  agentfs webhook create https://hooks.example.com/agentfs --type file.created --prefix reports/
  agentfs webhook deliveries wh_01jd8x2m4k9q7v3t5r6w8y0z1a
  agentfs webhook replay wh_01jd8x2m4k9q7v3t5r6w8y0z1a --after start
`,
		subs: []*command{webhookCreateCommand(), webhookLsCommand(), webhookRmCommand(), webhookDeliveriesCommand(),
			webhookReplayCommand(), webhookRotateCommand()},
	}
}

func webhookCreateCommand() *command {
	return clientCommand(command{
		name:    "webhook create",
		summary: "make a webhook and print its secret (shown once)",
		usage:   "agentfs webhook create URL [--type TYPE]... [--prefix PREFIX] [--run ID] [--description TEXT]",
		help: `Makes a webhook of the events that commit from now on and prints it with
its signing secret, which is shown only here: keep it where the receiver
verifies signatures.

Example:
  agentfs webhook create https://hooks.example.com/agentfs --type file.created,file.replaced
`}, false, func(fs *flag.FlagSet) verbFunc {
		var opts client.WebhookOptions
		fs.Func("type", "deliver only events of this `TYPE` (repeat, or separate with commas; default every type)", func(v string) error {
			for _, t := range strings.Split(v, ",") {
				if t = strings.TrimSpace(t); t != "" {
					opts.Types = append(opts.Types, t)
				}
			}
			return nil
		})
		fs.StringVar(&opts.Prefix, "prefix", "", "only events whose path starts with `PREFIX`")
		fs.StringVar(&opts.RunID, "run", "", "only events of the run `ID`")
		fs.StringVar(&opts.Description, "description", "", "a `TEXT` kept with it")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 {
				return usagef("webhook create needs one URL")
			}
			opts.URL = args[0]
			w, err := cli.client.CreateWebhook(ctx, opts)
			if err != nil {
				return err
			}
			return cli.printValue(w, fmt.Sprintf("webhook %s → %s\nsecret %s (shown once)", w.ID, w.URL, deref(w.Secret)))
		}
	})
}

func webhookLsCommand() *command {
	return clientCommand(command{
		name:    "webhook ls",
		summary: "list webhooks, oldest first",
		usage:   "agentfs webhook ls",
		help: `Lists webhooks, oldest first, without secrets: a JSON array when stdout is
not a terminal, a table on one.

Example:
  agentfs webhook ls
`}, false, lsVerb("webhook ls", func(ctx context.Context, c *client.Client, cursor string) ([]client.Webhook, bool, *string, error) {
		return pageOf(c.ListWebhooks(ctx, 0, cursor))
	}, "ID\tSTATUS\tURL\tTYPES\tPREFIX\tFAILED", func(w client.Webhook) string {
		types := strings.Join(w.Types, ",")
		if types == "" {
			types = "*"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", w.ID, w.Status, w.URL, types, w.Prefix, w.FailedAttempts)
	}))
}

// webhookByID is a webhook verb that takes one ID and prints the webhook
// it leaves, with line saying what happened.
func webhookByID(name, summary, help string, do func(c *client.Client, ctx context.Context, id string) (*client.Webhook, error),
	line func(*client.Webhook) string) *command {
	return clientCommand(command{name: name, summary: summary, usage: "agentfs " + name + " ID", help: help}, false,
		func(*flag.FlagSet) verbFunc {
			return func(ctx context.Context, cli *cliRun, args []string) error {
				if len(args) != 1 {
					return usagef("%s needs one ID", name)
				}
				w, err := do(cli.client, ctx, args[0])
				if err != nil {
					return err
				}
				return cli.printValue(w, line(w))
			}
		})
}

func webhookRmCommand() *command {
	return webhookByID("webhook rm", "remove a webhook and its delivery log", `Removes a webhook; its delivery stops.

Example:
  agentfs webhook rm wh_01jd8x2m4k9q7v3t5r6w8y0z1a
`, (*client.Client).DeleteWebhook, func(w *client.Webhook) string { return "removed webhook " + w.ID })
}

func webhookRotateCommand() *command {
	return webhookByID("webhook rotate", "give a webhook a new signing secret (shown once)", `Gives a webhook a new signing secret and prints it; every attempt from now
on is signed with it.

Example:
  agentfs webhook rotate wh_01jd8x2m4k9q7v3t5r6w8y0z1a
`, (*client.Client).RotateWebhookSecret, func(w *client.Webhook) string {
		return fmt.Sprintf("webhook %s\nsecret %s (shown once)", w.ID, deref(w.Secret))
	})
}

func webhookReplayCommand() *command {
	return clientCommand(command{
		name:    "webhook replay",
		summary: "deliver again every event after a cursor",
		usage:   "agentfs webhook replay ID --after CURSOR|start|now",
		help: `Moves the webhook's cursor to --after (an event cursor, as agentfs events
prints; start: the oldest kept event; now) and makes it active: every
matching event after it is delivered again, in order.

Example:
  agentfs webhook replay wh_01jd8x2m4k9q7v3t5r6w8y0z1a --after start
`}, false, func(fs *flag.FlagSet) verbFunc {
		after := fs.String("after", "", "the event `CURSOR` to deliver after (start, now, or a cursor)")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 || *after == "" {
				return usagef("webhook replay needs one ID and --after")
			}
			w, err := cli.client.ReplayWebhook(ctx, args[0], *after)
			if err != nil {
				return err
			}
			return cli.printValue(w, fmt.Sprintf("webhook %s replays after %s", w.ID, *after))
		}
	})
}

func webhookDeliveriesCommand() *command {
	return clientCommand(command{
		name:    "webhook deliveries",
		summary: "a webhook's delivery log: attempts, statuses, latency",
		usage:   "agentfs webhook deliveries ID [--limit N]",
		help: `Prints a webhook's latest delivery attempts, oldest first on a terminal
(a JSON array, newest first, otherwise): when, which event, which attempt
at it, what the receiver answered (or why nothing came) and how long it took.

Example:
  agentfs webhook deliveries wh_01jd8x2m4k9q7v3t5r6w8y0z1a --limit 20
`}, false, func(fs *flag.FlagSet) verbFunc {
		limit := fs.Int("limit", 100, "how many of the latest attempts (`N`, at most 1000)")
		return func(ctx context.Context, cli *cliRun, args []string) error {
			if len(args) != 1 {
				return usagef("webhook deliveries needs one ID")
			}
			l, err := cli.client.WebhookDeliveries(ctx, args[0], *limit, "")
			if err != nil {
				return err
			}
			return cli.printOr(l.Data, func() error {
				printDeliveries(cli, l.Data)
				return nil
			})
		}
	})
}

// printDeliveries writes a delivery log, oldest first.
func printDeliveries(cli *cliRun, list []client.WebhookDelivery) {
	fmt.Fprintln(cli.stdout, "AT\tEVENT\tATTEMPT\tSTATUS\tCODE\tLATENCY\tERROR")
	for _, d := range slices.Backward(list) {
		code := "-"
		if d.StatusCode != nil {
			code = fmt.Sprint(*d.StatusCode)
		}
		fmt.Fprintf(cli.stdout, "%s\t%s\t%d\t%s\t%s\t%dms\t%s\n", d.At.Local().Format(time.TimeOnly+".000"), d.EventID,
			d.Attempt, d.Status, code, d.LatencyMS, deref(d.Error))
	}
}
