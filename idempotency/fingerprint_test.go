package idempotency_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
)

func TestCanonicalJSON(t *testing.T) {
	t.Parallel()
	same := [][2]string{
		{`{"a":1,"b":[1,2]}`, `{ "b" : [1, 2], "a" : 1 }`},
		{`{"x":{"z":true,"y":null}}`, "{\n\"x\": {\"y\": null, \"z\": true}\n}"},
		{`"<&>"`, `"<&>"`},
	}
	for _, tc := range same {
		a, errA := idempotency.CanonicalJSON([]byte(tc[0]))
		b, errB := idempotency.CanonicalJSON([]byte(tc[1]))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s and %s: %s / %s (%v %v)", tc[0], tc[1], a, b, errA, errB)
		}
	}
	different := [][2]string{
		{`{"a":1}`, `{"a":2}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":1}`, `{"a":1,"b":null}`},
		{`{"a":"1"}`, `{"a":1}`},
	}
	for _, tc := range different {
		a, _ := idempotency.CanonicalJSON([]byte(tc[0]))
		b, _ := idempotency.CanonicalJSON([]byte(tc[1]))
		if bytes.Equal(a, b) {
			t.Errorf("%s and %s canonicalise alike", tc[0], tc[1])
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} {"b":2}`, `{"a":1}x`, `nul`} {
		if _, err := idempotency.CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `[]`, `1e10`, `{"":{"":[]}}`, `"\u00e9"`, `{"a":1}{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := idempotency.CanonicalJSON(data)
		if err != nil {
			if json.Valid(data) {
				t.Fatalf("valid JSON %q rejected: %v", data, err)
			}
			return
		}
		// Canonical form is a fixed point and means the same value.
		again, err := idempotency.CanonicalJSON(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", data, c, again, err)
		}
		var v1, v2 any
		d1 := json.NewDecoder(bytes.NewReader(data))
		d1.UseNumber()
		d2 := json.NewDecoder(bytes.NewReader(c))
		d2.UseNumber()
		if d1.Decode(&v1) != nil || d2.Decode(&v2) != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("value changed: %q -> %q", data, c)
		}
	})
}

func TestPutRequest(t *testing.T) {
	t.Parallel()
	base := agentfs.Put{Path: "a", ContentType: "text/plain", By: agentfs.Attribution{RunID: "r"}}
	sum := idempotency.PutRequest(base).Sum()
	// What is not part of the request: the subject (keys are scoped by it),
	// the declared size and the upload limit.
	same := base
	same.Subject, same.Size, same.MaxBytes = "other", 99, 1
	if !bytes.Equal(idempotency.PutRequest(same).Sum(), sum) {
		t.Error("subject, size or limit changed the put fingerprint")
	}
	for name, change := range map[string]func(*agentfs.Put){
		"Path":        func(p *agentfs.Put) { p.Path = "b" },
		"Replace":     func(p *agentfs.Put) { p.Replace = true },
		"IfMatch":     func(p *agentfs.Put) { p.IfMatch = `"x"` },
		"IfNoneMatch": func(p *agentfs.Put) { p.IfNoneMatchAny = true },
		"ContentType": func(p *agentfs.Put) { p.ContentType = "text/csv" },
		"AgentID":     func(p *agentfs.Put) { p.By.AgentID = "a" },
		"RunID":       func(p *agentfs.Put) { p.By.RunID = "r2" },
	} {
		p := base
		change(&p)
		if bytes.Equal(idempotency.PutRequest(p).Sum(), sum) {
			t.Errorf("%s does not change the put fingerprint", name)
		}
	}
	// Field boundaries are unambiguous.
	a := idempotency.Request{Operation: "ab", Target: "c"}.Sum()
	b := idempotency.Request{Operation: "a", Target: "bc"}.Sum()
	if bytes.Equal(a, b) {
		t.Error("fields run into each other")
	}
}
