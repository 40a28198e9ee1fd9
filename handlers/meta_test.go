package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/storage"
)

func TestMetaRoutes(t *testing.T) {
	c, b := setup(t)
	anon := apitest.NewClient(t, b.srv.URL, "")

	t.Run("Protocol", func(t *testing.T) {
		var p struct {
			APIVersion  string `json:"api_version"`
			Idempotency struct {
				Header           string `json:"header"`
				RetentionSeconds int64  `json:"retention_seconds"`
			} `json:"idempotency"`
			Retry struct {
				RetryableStatuses []int `json:"retryable_statuses"`
				MaxAttempts       int   `json:"max_attempts"`
			} `json:"retry"`
			Limits map[string]any `json:"limits"`
		}
		anon.Do("GET", "/v1/protocol", nil).Expect(t, 200).JSON(t, &p)
		if p.APIVersion != "v1" || p.Idempotency.Header != "Idempotency-Key" || p.Idempotency.RetentionSeconds != 7*24*3600 {
			t.Fatalf("protocol: %+v", p)
		}
		if p.Limits["max_upload_bytes"] != float64(64<<20) || p.Limits["max_path_bytes"] != float64(1024) || p.Retry.MaxAttempts != 8 {
			t.Fatalf("protocol limits: %+v", p)
		}
	})

	t.Run("HealthAndReadiness", func(t *testing.T) {
		anon.Do("GET", "/healthz", nil).Expect(t, 200)
		anon.Do("GET", "/readyz", nil).Expect(t, 200)
	})

	t.Run("MetricsCountRequests", func(t *testing.T) {
		upload(t, c, "m.txt", "x").Expect(t, 201)
		res := anon.Do("GET", "/metrics", nil).Expect(t, 200)
		if !regexp.MustCompile(`agentfs_http_requests_total\{method="POST",route="/v1/files",status="201"\} [1-9]`).Match(res.Body) {
			t.Fatalf("metrics lack the upload:\n%s", res.Body)
		}
	})

	t.Run("ServesTheSpec", func(t *testing.T) {
		res := anon.Do("GET", "/openapi.yaml", nil).Expect(t, 200)
		if string(res.Body) != string(agentfs.OpenAPI) {
			t.Fatal("served spec differs from the embedded one")
		}
	})

	t.Run("ExplainsProblemCodes", func(t *testing.T) {
		var k struct {
			Code   string `json:"code"`
			Status int    `json:"status"`
		}
		anon.Do("GET", "/problems/PATH_EXISTS", nil).Expect(t, 200).JSON(t, &k)
		if k.Code != "PATH_EXISTS" || k.Status != 409 {
			t.Fatalf("problem kind: %+v", k)
		}
		anon.Do("GET", "/problems/NO_SUCH_CODE", nil).ExpectProblem(t, 404, "NOT_FOUND")
	})

	t.Run("UnknownRoutesAndMethodsAreProblems", func(t *testing.T) {
		c.Do("GET", "/v1/nope", nil).ExpectProblem(t, 404, "NOT_FOUND")
		anon.Do("GET", "/nope", nil).ExpectProblem(t, 404, "NOT_FOUND")
		res := c.Do("PUT", "/v1/files", "x")
		res.ExpectProblem(t, 405, "METHOD_NOT_ALLOWED")
		if !strings.Contains(res.Header.Get("Allow"), "GET") {
			t.Fatalf("405 Allow %q", res.Header.Get("Allow"))
		}
	})

	t.Run("EchoesSaneRequestIDs", func(t *testing.T) {
		res := anon.Do("GET", "/healthz", nil, "X-Request-ID", "trace-123")
		if res.Header.Get("X-Request-ID") != "trace-123" {
			t.Fatalf("X-Request-ID %q", res.Header.Get("X-Request-ID"))
		}
		res = anon.Do("GET", "/nope", nil, "X-Request-ID", "bad id with spaces")
		p := res.Problem(t)
		if got := res.Header.Get("X-Request-ID"); got == "bad id with spaces" || p.RequestID != got {
			t.Fatalf("X-Request-ID %q, problem request_id %q", got, p.RequestID)
		}
	})
}

// TestSpecCoversEveryRoute fails when Echo serves a route that openapi.yaml
// lacks, so the contract cannot fall behind the code.
func TestSpecCoversEveryRoute(t *testing.T) {
	_, b := setup(t)
	doc, _ := apitest.Spec(t)
	for _, r := range b.srv.API.Routes() {
		if r.Path == "/console" || r.Path == "/console/*" {
			continue // the console's page and assets (package console), for browsers, not the API
		}
		path := regexp.MustCompile(`:([a-z_]+)`).ReplaceAllString(r.Path, "{$1}")
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("Echo serves %s %s but openapi.yaml does not describe it", r.Method, path)
		}
	}
}

// Ids of the right form that the panicking store treats specially.
var (
	panicID = "file_" + strings.Repeat("p", 26)
	failID  = "file_" + strings.Repeat("f", 26)
)

// panicking is the real store except that reading one id panics, to prove a
// panic becomes a generic 500 problem.
type panicking struct{ *storage.Store }

func (p panicking) File(ctx context.Context, subject, id string) (*agentfs.File, error) {
	if id == panicID {
		panic("boom: secret internal detail")
	}
	if id == failID {
		return nil, errors.New("pq: secret internal detail")
	}
	return p.Store.File(ctx, subject, id)
}

func TestInternalErrorsDoNotLeak(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.Options{Wrap: func(s *storage.Store) reads.Store { return panicking{s} }})
	c := srv.Client(t, "alice")
	for _, id := range []string{panicID, failID} {
		res := c.Do("GET", "/v1/files/"+id, nil)
		p := res.ExpectProblem(t, 500, "INTERNAL")
		if strings.Contains(string(res.Body), "secret") || !p.Retryable {
			t.Fatalf("500 problem leaks or is not retryable: %s", res.Body)
		}
	}
	if !strings.Contains(srv.Logs.String(), "secret internal detail") {
		t.Fatal("the cause of a 500 was not logged")
	}
	c.Do("GET", "/healthz", nil).Expect(t, 200) // the server survived
	var body map[string]any
	if err := json.Unmarshal(c.Do("GET", "/v1/files/"+failID, nil).Body, &body); err != nil || body["code"] != "INTERNAL" {
		t.Fatalf("body %v err %v", body, err)
	}
}

// TestProtocolListsEveryKeyedRoute: /v1/protocol's required_on names
// exactly the routes that answer 400 IDEMPOTENCY_KEY_REQUIRED without a
// key, and openapi.yaml marks exactly those with the required key.
func TestProtocolListsEveryKeyedRoute(t *testing.T) {
	c, b := setup(t)
	var p struct {
		Idempotency struct {
			RequiredOn []string `json:"required_on"`
		} `json:"idempotency"`
	}
	c.Do("GET", "/v1/protocol", nil).Expect(t, 200).JSON(t, &p)
	listed := map[string]bool{}
	for _, r := range p.Idempotency.RequiredOn {
		listed[r] = true
	}
	doc, _ := apitest.Spec(t)
	param := regexp.MustCompile(`:([a-z_]+)`)
	answered := map[string]bool{}
	for _, r := range b.srv.API.Routes() {
		if r.Method == "GET" || r.Method == "HEAD" || r.Method == "OPTIONS" || !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		route := r.Method + " " + param.ReplaceAllString(r.Path, "{$1}")
		if answered[route] {
			continue
		}
		answered[route] = true
		// Well-formed ids of every kind: the key is checked before them.
		path := param.ReplaceAllStringFunc(r.Path, func(string) string { return "file_" + strings.Repeat("0", 26) })
		res := c.Do(r.Method, path, `{}`, "Content-Type", "application/json")
		needsKey := res.Status == 400 && res.Problem(t).Code == "IDEMPOTENCY_KEY_REQUIRED"
		if needsKey != listed[route] {
			t.Errorf("%s answered %d without a key; required_on lists it: %v", route, res.Status, listed[route])
		}
		op := doc.Paths.Find(param.ReplaceAllString(r.Path, "{$1}")).GetOperation(r.Method)
		specRequires := false
		for _, prm := range op.Parameters {
			if prm.Value != nil && prm.Value.In == "header" && prm.Value.Name == "Idempotency-Key" && prm.Value.Required {
				specRequires = true
			}
		}
		if specRequires != listed[route] {
			t.Errorf("openapi.yaml requires the key on %s: %v; required_on lists it: %v", route, specRequires, listed[route])
		}
	}
	for r := range listed {
		if !answered[r] {
			t.Errorf("required_on lists %s, which is no write route", r)
		}
	}
}
