package mcpserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	for _, c := range []struct {
		body  string
		env   envelope
		wrong bool
	}{
		{body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, env: envelope{calls: 1}},
		{body: ` {"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n", env: envelope{}},
		{body: `{"jsonrpc":"2.0","id":null,"method":"x"}`, env: envelope{}},
		{body: `{"jsonrpc":"2.0","id":"a","result":{}}`, env: envelope{}},
		{body: `[{"id":1,"method":"a"},{"method":"b"},{"id":"2","method":"c"},{"id":3,"result":1}]`, env: envelope{batch: true, calls: 2}},
		{body: "\t[ ]\n", env: envelope{batch: true}},
		{body: ``, wrong: true},
		{body: `[`, wrong: true},
		{body: `[1]`, wrong: true},
		{body: `{"id":1,"method":"a"} {"id":2,"method":"b"}`, wrong: true},
		{body: `[{"id":1,"method":"a"}]x`, wrong: true},
		{body: `{"method":7}`, wrong: true},
		{body: `"tools/call"`, wrong: true},
	} {
		env, err := inspect([]byte(c.body))
		if (err != nil) != c.wrong || env.batch != c.env.batch || env.calls != c.env.calls {
			t.Errorf("inspect(%q) = %+v, %v; want %+v, wrong %v", c.body, env, err, c.env, c.wrong)
		}
	}
}

// FuzzInspect: inspect reads a body in one pass, a message at a time;
// whatever arrives, it agrees with decoding the whole body at once.
func FuzzInspect(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"tools/call"}`, `[{"id":1,"method":"a"},{"method":"b"}]`, `[]`, `[1]`, ` {} `, `{"ID":2,"Method":"m"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := inspect(body)
		var want envelope
		var werr error
		if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
			var ms []messageHead
			werr = json.Unmarshal(body, &ms)
			want.batch = true
			for _, m := range ms {
				if m.isCall() {
					want.calls++
				}
			}
		} else {
			var m messageHead
			if werr = json.Unmarshal(body, &m); m.isCall() {
				want.calls = 1
			}
		}
		if (err != nil) != (werr != nil) || err == nil && (env.batch != want.batch || env.calls != want.calls) {
			t.Fatalf("inspect(%q) = %+v, %v; decoding it whole: %+v, %v", body, env, err, want, werr)
		}
	})
}

func TestBatchesAllowed(t *testing.T) {
	for _, c := range []struct {
		versions []string
		ok       bool
	}{
		{nil, true},
		{[]string{"2025-03-26"}, true},
		{[]string{" 2025-03-26 "}, true},
		{[]string{"2024-11-05"}, false},
		{[]string{"2025-06-18"}, false},
		{[]string{"2025-11-25"}, false},
		{[]string{"2026-07-28"}, false},
		{[]string{""}, false},
		{[]string{"2025-03-26", "2025-03-26"}, false},
		{[]string{"2025-03-26,2025-06-18"}, false},
	} {
		if got := batchesAllowed(c.versions); got != c.ok {
			t.Errorf("batchesAllowed(%q) = %v, want %v", c.versions, got, c.ok)
		}
	}
}

// FuzzBatchesAllowed: of any MCP-Protocol-Version header values, only the
// one version that had batches allows them.
func FuzzBatchesAllowed(f *testing.F) {
	for _, s := range []string{"", "2025-03-26", "2024-11-05", "2025-03-26\x002025-03-26", " 2025-03-26\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		values := strings.Split(header, "\x00")
		if header == "" {
			values = nil
		}
		want := len(values) == 0 || len(values) == 1 && strings.TrimSpace(values[0]) == batchProtocol
		if got := batchesAllowed(values); got != want {
			t.Fatalf("batchesAllowed(%q) = %v, want %v", values, got, want)
		}
	})
}

func TestScanCall(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		body string
		want callHead
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"` + long + `"}}}`,
			callHead{ID: json.RawMessage(`7`), Method: "tools/call", Tool: "write_file"}},
		// The TypeScript SDK writes the id after the arguments.
		{`{"method":"tools/call","params":{"arguments":{"content":"` + long + `\"\\"},"name":"edit_file"},"jsonrpc":"2.0","id":"k-1"}`,
			callHead{ID: json.RawMessage(`"k-1"`), Method: "tools/call", Tool: "edit_file"}},
		{`{"\u0069d": -1.5e3, "method": "tools/call", "params": {"name": "w\u0072ite_file"}}`,
			callHead{ID: json.RawMessage(`-1.5e3`), Method: "tools/call", Tool: "write_file"}},
		{`{"id":{"a":1},"method":"x","params":[1,{"name":"n"}]}`, callHead{Method: "x"}},
		{`{"id":1,"id":2,"params":{"name":"a"},"params":3}`, callHead{ID: json.RawMessage(`2`)}},
		{`[{"id":1,"method":"tools/call"}]`, callHead{Batch: true}},
		{`{"id":"` + strings.Repeat("a", 300) + `","method":"tools/call"}`, callHead{Method: "tools/call"}},
	} {
		h, _ := scanCall(strings.NewReader(c.body), 1<<30)
		if !bytes.Equal(h.ID, c.want.ID) || h.Method != c.want.Method || h.Tool != c.want.Tool || h.Batch != c.want.Batch {
			t.Errorf("scanCall(%.80q) = %+v (id %s), want %+v (id %s)", c.body, h, h.ID, c.want, c.want.ID)
		}
	}
	h, err := scanCall(strings.NewReader(`{"method":"tools/call","params":{"arguments":"`+long+`"},"id":1}`), 1<<10)
	if err == nil || h.ID != nil {
		t.Fatalf("a body past the limit: %+v %v", h, err)
	}
}

// FuzzScanCall: scanCall reads any body in constant memory and never
// panics; of a JSON object it finds what decoding the whole object finds:
// the last id (a scalar of at most 256 bytes), method and params' name.
func FuzzScanCall(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"tools/call","params":{"name":"write_file"}}`,
		`{"params":{"name":"x","arguments":{"a":[1,2,{"b":"\"}"}]}},"id":"s","method":"m"}`, `{"id":1,"id":null}`,
		`[{"id":1}]`, `{"id":tru}`, `{"\u0069d":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := scanCall(bytes.NewReader(body), 1<<20)
		var m map[string]json.RawMessage
		if err != nil || json.Unmarshal(body, &m) != nil {
			return
		}
		if id, ok := m["id"]; ok && len(id) <= maxHeadBytes && id[0] != '{' && id[0] != '[' {
			if !bytes.Equal(h.ID, id) {
				t.Fatalf("scanCall(%q): id %s, decoding finds %s", body, h.ID, id)
			}
		} else if h.ID != nil {
			t.Fatalf("scanCall(%q): id %s, decoding finds none it keeps", body, h.ID)
		}
		var method string
		if raw, ok := m["method"]; ok && json.Unmarshal(raw, &method) == nil && len(raw) <= maxHeadBytes && h.Method != method {
			t.Fatalf("scanCall(%q): method %q, decoding finds %q", body, h.Method, method)
		}
		var params map[string]json.RawMessage
		var name string
		if raw, ok := m["params"]; ok && json.Unmarshal(raw, &params) == nil && json.Unmarshal(params["name"], &name) == nil &&
			len(params["name"]) <= maxHeadBytes && h.Tool != name {
			t.Fatalf("scanCall(%q): tool %q, decoding finds %q", body, h.Tool, name)
		}
	})
}

func TestMessageIDs(t *testing.T) {
	calls := messageIDs([]byte(`[{"id":1,"method":"a"},{"id":"1","method":"b"},{"method":"n"},{"id":2,"result":{}}]`+"\n"), false)
	answers := messageIDs([]byte(`{"jsonrpc":"2.0","id":1.0,"result":{}}`), true)
	if len(calls) != 2 || len(answers) != 1 {
		t.Fatalf("calls %v, answers %v", calls, answers)
	}
	for k := range answers {
		if _, ok := calls[k]; !ok {
			t.Fatalf("the answer to id 1 (%s) does not match its call (%v)", k, calls)
		}
	}
	if ids := messageIDs([]byte("not json"), false); len(ids) != 0 {
		t.Fatalf("ids of a line that is not JSON: %v", ids)
	}
}

// FuzzMessageIDs: a line of stdin, whatever it holds, never panics, and
// the id of a call it holds is noted once.
func FuzzMessageIDs(f *testing.F) {
	for _, s := range []string{`{"id":1,"method":"a"}`, `[{"id":"x","method":"a"},{"id":2}]`, `[`, `{"id":[1]}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, line []byte, answers bool) {
		ids := messageIDs(line, answers)
		var m messageHead
		if json.Unmarshal(line, &m) == nil && m.isCall() && !answers {
			var v any
			if json.Unmarshal(m.ID, &v) == nil && len(ids) != 1 {
				t.Fatalf("messageIDs(%q) = %v, want the call's id", line, ids)
			}
		}
	})
}
