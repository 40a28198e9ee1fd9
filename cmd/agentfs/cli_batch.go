package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentfs/agentfs/client"
)

// batchCommand is agentfs batch FILE.json, with batch cancel beside it.
func batchCommand() *command {
	return clientCommand(command{
		name:    "batch",
		summary: "run many operations as one durable batch; batch cancel ID stops one",
		usage: `agentfs batch FILE.json [--wait] [--key KEY]
agentfs batch cancel BATCH_ID`,
		subs: []*command{batchCancelCommand()},
		help: `Admits the operations in FILE.json (or - for stdin) as one batch and prints
the batch as JSON. FILE.json holds {"operations":[...]}, each one of
  {"op":"put","path":P,"content":C,"encoding":"utf8"|"base64","content_type":T,"if_exists":"error"|"replace","idempotency_key":K,"expires_in":SECONDS}
  {"op":"delete","file_id":ID}   {"op":"restore","file_id":ID}
  {"op":"copy","file_id":ID,"path":P,"if_exists":"error"|"replace"}
The whole batch is validated first; then its items run in order in the
background. --wait waits until every item has run; the command then exits 1
if any failed, after printing each failed item's code on stderr. The batch
is sent with one Idempotency-Key (--key to choose it: the same command with
the same key returns the same batch instead of running it twice).

agentfs batches lists batches; agentfs batch cancel BATCH_ID cancels the
items of one that have not run yet.

Example:
  agentfs batch ops.json --wait --key nightly-2025-01-02
`}, false, batchFlags)
}

func batchFlags(fs *flag.FlagSet) verbFunc {
	wait := fs.Bool("wait", false, "wait until every item has run; exit 1 if any failed")
	key := keyFlag(fs, "batch")
	return func(ctx context.Context, cli *cliRun, args []string) error {
		if len(args) != 1 {
			return usagef("batch needs one FILE.json (or - for stdin)")
		}
		ops, err := readBatchFile(args[0], os.Stdin)
		if err != nil {
			return err
		}
		opts := client.BatchOptions{IdempotencyKey: *key}
		if *wait {
			opts.Wait = client.MaxBatchWait // the server answers as soon as the batch ends
		}
		b, err := cli.client.CreateBatch(ctx, ops, opts)
		if err != nil {
			return err
		}
		if *wait && !b.Terminal() {
			if b, err = cli.client.WaitBatch(ctx, b.ID); err != nil {
				return err
			}
		}
		if err := cli.printBatch(b); err != nil {
			return err
		}
		return cli.batchOutcome(b)
	}
}

// readBatchFile reads {"operations":[...]} from the file name, or from
// stdin for "-". Unknown fields are refused here, before anything is sent.
func readBatchFile(name string, stdin io.Reader) ([]client.BatchOp, error) {
	var (
		raw []byte
		err error
	)
	if name == "-" {
		raw, err = io.ReadAll(stdin)
		name = "stdin"
	} else {
		raw, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Operations []json.RawMessage `json:"operations"`
	}
	if err := strictJSON(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: want {\"operations\":[...]}: %w", name, err)
	}
	if len(doc.Operations) == 0 {
		return nil, fmt.Errorf("%s: no operations", name)
	}
	ops := make([]client.BatchOp, len(doc.Operations))
	for i, op := range doc.Operations {
		var content struct {
			Content *string `json:"content"`
		}
		err := strictJSON(op, &ops[i])
		if err == nil && ops[i].Op == client.BatchOpPut {
			if err = json.Unmarshal(op, &content); err == nil && content.Content == nil {
				err = fmt.Errorf("a put needs content (\"\" for an empty file)")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: operations[%d]: %w", name, i, err)
		}
	}
	return ops, nil
}

func strictJSON(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// printBatch prints the batch as JSON, indented on a terminal.
func (cli *cliRun) printBatch(b *client.Batch) error {
	enc := json.NewEncoder(cli.stdout)
	if cli.human {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(b)
}

// batchOutcome prints each failed item of a batch that ended with
// failures on stderr, and fails the command.
func (cli *cliRun) batchOutcome(b *client.Batch) error {
	if b.Status != client.BatchFailed && b.Status != client.BatchPartiallySucceeded {
		return nil
	}
	failed := b.FailedItems()
	for _, it := range failed {
		target := ""
		if it.Path != nil {
			target = " " + *it.Path
		}
		line := fmt.Sprintf("item %d (%s%s) failed", it.Index, it.Op, target)
		if p := it.Error; p != nil {
			line += fmt.Sprintf(": %d %s: %s", p.Status, p.Code, cmp.Or(p.Detail, p.Title))
			if p.ExistingFileID != "" {
				line += " (existing_file_id " + p.ExistingFileID + ")"
			}
		}
		fmt.Fprintln(cli.stderr, line)
	}
	return fmt.Errorf("batch %s %s: %d of %d items failed", b.ID, b.Status, len(failed), b.Counts.Total)
}
