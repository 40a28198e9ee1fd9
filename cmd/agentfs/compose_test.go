package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml this test holds to the
// binary and docs/operating.md.
type composeFile struct {
	Services map[string]struct {
		Image       string `yaml:"image"`
		Build       any    `yaml:"build"`
		Command     []string
		Environment map[string]string `yaml:"environment"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		DependsOn map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
	} `yaml:"services"`
}

// minioImage is the MinIO release the compose file runs: Docker Hub no
// longer serves minio/minio.
const minioImage = "quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z"

// TestComposeFile checks docker-compose.yml where no Docker engine runs
// (make compose-check runs docker compose config where one does): it
// parses, its images are pinned, every service it waits for has a
// healthcheck, and the agentfs healthcheck is a command this binary has,
// at the path the Dockerfile puts it.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc composeFile
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"postgres", "minio", "agentfs"} {
		if _, ok := doc.Services[name]; !ok {
			t.Fatalf("no service %s in docker-compose.yml", name)
		}
	}
	if got := doc.Services["minio"].Image; got != minioImage {
		t.Errorf("minio image %q, want %q", got, minioImage)
	}
	pinned := regexp.MustCompile(`^[a-z0-9./-]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$`)
	for name, svc := range doc.Services {
		if svc.Build != nil {
			continue // built here from this tree
		}
		if !pinned.MatchString(svc.Image) || strings.HasSuffix(svc.Image, ":latest") {
			t.Errorf("service %s runs %q, not a pinned image", name, svc.Image)
		}
		if svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0 {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
	for name, svc := range doc.Services {
		for dep, d := range svc.DependsOn {
			if other, ok := doc.Services[dep]; !ok || d.Condition == "service_healthy" && other.Healthcheck == nil {
				t.Errorf("service %s waits for %s to be healthy, which has no healthcheck", name, dep)
			}
		}
	}

	agentfs := doc.Services["agentfs"]
	if agentfs.Healthcheck == nil {
		t.Fatal("the agentfs service has no healthcheck")
	}
	test := agentfs.Healthcheck.Test
	// Exec form: the distroless image has no shell for CMD-SHELL.
	if len(test) < 3 || test[0] != "CMD" || test[1] != "/agentfs" {
		t.Fatalf("agentfs healthcheck %q, want [CMD /agentfs healthcheck ...]", test)
	}
	if c, n := find(commands, test[2:3]); c == nil || n != 1 || c.name != "healthcheck" {
		t.Fatalf("agentfs healthcheck runs %q, which is not the healthcheck command", test[2:])
	}
	stdout, _, err := cliEnv{}.run(append(test[2:], "--help")...)
	if err != nil || !strings.Contains(stdout, "Usage: agentfs healthcheck") {
		t.Fatalf("the healthcheck's arguments %q do not parse: %v", test[2:], err)
	}
	if addr := agentfs.Environment["AGENTFS_LISTEN_ADDR"]; addr == "" || healthBase(func(k string) string {
		return agentfs.Environment[k]
	}) != "http://127.0.0.1:8080" {
		t.Errorf("the healthcheck would not reach the server listening on %q", addr)
	}
	if _, err := recordKeys(func(k string) string { return agentfs.Environment[k] }); err != nil {
		t.Errorf("the agentfs service would not start: %v", err)
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^COPY --from=build \S+ /agentfs$`).Match(dockerfile) ||
		!strings.Contains(string(dockerfile), `ENTRYPOINT ["/agentfs"]`) {
		t.Error("the Dockerfile does not install the binary as /agentfs")
	}
	ops, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ops), minioImage) {
		t.Errorf("docs/operating.md does not name the MinIO image %s", minioImage)
	}
}
