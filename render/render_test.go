package render

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
)

// problems holds a problem with every member set and others with few, so
// that a member api.Problem lacks, or names or orders otherwise than
// problem.Problem, shows as changed bytes.
func problems() map[string]*problem.Problem {
	every := problem.New(problem.PathExists, `a live file holds "a<b>&c.txt" (é, ✓)`)
	every.Instance = "/v1/batch/batch_1/items/2"
	every.RequestID = "req_1"
	every.Errors = []problem.FieldError{{Field: "operations[2].path", Message: "bad"}, {Field: "x", Message: "y"}}
	every.ExistingFileID = "file_1"
	every.MissingParts = []int{2, 3}
	every.MissingScope = "write"
	validation := problem.Validation("operations[0].if_exists", "want error or replace")
	return map[string]*problem.Problem{
		"EveryMember": every,
		"Validation":  validation,
		"Bare":        {Type: "/problems/INTERNAL", Code: problem.Internal},
	}
}

// jsonMembers lists a struct's JSON members with their options, in order.
func jsonMembers(t reflect.Type) []string {
	var out []string
	for _, f := range reflect.VisibleFields(t) {
		if tag := f.Tag.Get("json"); f.IsExported() && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

func TestProblem(t *testing.T) {
	t.Run("NamesTheServersMembers", func(t *testing.T) {
		server, wire := jsonMembers(reflect.TypeFor[problem.Problem]()), jsonMembers(reflect.TypeFor[api.Problem]())
		if !slices.Equal(server, wire) {
			t.Fatalf("problem.Problem has the members %v, api.Problem %v: a batch item's recorded problem would change", server, wire)
		}
	})
	for name, p := range problems() {
		t.Run("ShowsEveryMember"+name, func(t *testing.T) {
			got, err := json.Marshal(Problem(p))
			if err != nil {
				t.Fatal(err)
			}
			if want := problem.Encode(p); !bytes.Equal(got, want) {
				t.Fatalf("the upload's error shows\n%s\nwhere the problem is\n%s", got, want)
			}
		})
	}
}

func TestItemProblem(t *testing.T) {
	for name, p := range problems() {
		t.Run("KeepsTheRecordedBytes"+name, func(t *testing.T) {
			recorded := problem.Encode(p)
			got, err := json.Marshal(itemProblem(recorded))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, recorded) {
				t.Fatalf("the item's error shows\n%s\nwhere it recorded\n%s", got, recorded)
			}
		})
	}
	t.Run("NoneForNone", func(t *testing.T) {
		for _, raw := range []string{"", "null"} {
			if p := itemProblem([]byte(raw)); p != nil {
				t.Fatalf("%q: %+v", raw, p)
			}
		}
	})
	t.Run("InternalForUnreadable", func(t *testing.T) {
		p := itemProblem([]byte(`{"status":"four hundred"}`))
		if p == nil || p.Code != problem.Internal || p.Status != 500 {
			t.Fatalf("%+v", p)
		}
	})
}
