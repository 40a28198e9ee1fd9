package render

import (
	"bytes"
	"encoding/json"
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
		"Bare":        {Problem: api.Problem{Type: "/problems/INTERNAL", Code: problem.Internal}},
	}
}

func TestProblem(t *testing.T) {
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
