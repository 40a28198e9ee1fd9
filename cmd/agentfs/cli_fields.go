package main

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"strconv"
	"strings"

	"github.com/agentfs/agentfs/client"
)

// fileView is a file of a listing asked with --fields: its id and the
// members named, in the order named, as the server answered them (the
// others it left out are not shown as zeros).
type fileView struct {
	members []string
	values  map[string]json.RawMessage
}

func viewOf(f *client.File, members []string) (*fileView, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	v := &fileView{members: append([]string{"id"}, members...)}
	return v, json.Unmarshal(b, &v.values)
}

// MarshalJSON is the object of the members shown, in their order.
func (v *fileView) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range v.members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m)
		b.Write(k)
		b.WriteByte(':')
		b.Write(orNull(v.values[m]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// row is the members' values separated by tabs, strings unquoted.
func (v *fileView) row() string {
	cells := make([]string, len(v.members))
	for i, m := range v.members {
		raw := orNull(v.values[m])
		var s string
		if json.Unmarshal(raw, &s) == nil {
			cells[i] = s
		} else {
			cells[i] = string(raw)
		}
	}
	return strings.Join(cells, "\t")
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// listFields lists the files opts selects with only opts.Fields of each
// (fields=), at most limit of them (0: all).
func listFields(ctx context.Context, cli *cliRun, opts client.ListOptions, limit int) error {
	opts.Limit = pageSize(limit)
	header := "ID\t" + strings.ToUpper(strings.Join(opts.Fields, "\t"))
	out := cli.lister(header, func(v any) string { return v.(*fileView).row() })
	views := func(yield func(*fileView, error) bool) {
		for f, err := range cli.client.AllFiles(ctx, opts) {
			var v *fileView
			if err == nil {
				v, err = viewOf(f, opts.Fields)
			}
			if !yield(v, err) || err != nil {
				return
			}
		}
	}
	return listAll(iter.Seq2[*fileView, error](views), limit, out)
}

// intFlag is the value of the integer flag name once parsed.
func intFlag(v interface{ String() string }) int {
	n, _ := strconv.Atoi(v.String())
	return n
}
