# AgentFS developer tasks. Run `make` for the list.

SHELL := /bin/bash
GO ?= go
FUZZTIME ?= 20s
# Extra arguments for `make test`, e.g. make test ARGS='./handlers/ -run TestUpload'
ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help run test test-minio readme-check build deps tools fuzz vet clean bench compose-check scale-test

help:
	@echo 'AgentFS make targets:'
	@echo '  make run     build and run AgentFS with a local Postgres and versitygw (data in .data/)'
	@echo '  make test    run go test -race, then the Python SDK tests (sdk/python), against'
	@echo '               throwaway Postgres and versitygw, then the README check'
	@echo "               (extra go test arguments: make test ARGS='./handlers/ -run X';"
	@echo '               AGENTFS_TEST_PYTHON=0 skips the Python tests and the README check)'
	@echo "  make readme-check  run README.md's examples in order against a fresh make run"
	@echo '  make test-minio  the same tests against a throwaway MinIO (built into bin/minio the first time)'
	@echo '  make build   build bin/agentfs'
	@echo '  make deps    install Postgres and python3 packages (apt) and bin/versitygw (go install) if missing'
	@echo '  make tools   install every part the tests may need if missing (Node 24, the npm tools of tools/node,'
	@echo '               bin/hydra, Debian chromium fuse3 ripgrep rclone haproxy pg_auto_failover), print their'
	@echo "               versions and check that each runs (only some: make tools ARGS='node npm')"
	@echo '  make fuzz    run every Go fuzz target for FUZZTIME each (default 20s)'
	@echo '  make vet     go vet ./...'
	@echo '  make bench   AgentFS against direct minio-go on throwaway servers (BENCH_QUICK=1: small sizes)'
	@echo '  make scale-test  3 API instances behind HAProxy, MinIO distributed, Postgres under pg_auto_failover:'
	@echo '               a mixed load through faults, then its checks (docs/scaling.md; not part of make test)'
	@echo '  make compose-check  docker compose config -q where Docker Compose is installed, and a Go test'
	@echo '               that parses docker-compose.yml and checks its image pins and healthchecks'
	@echo '  make clean   remove bin/agentfs (keeps .data/)'

run:
	bash scripts/run.sh

test:
	bash scripts/test.sh $(ARGS)

test-minio:
	AGENTFS_S3_SERVER=minio bash scripts/test.sh $(ARGS)

readme-check:
	bash scripts/readme-check.sh

build:
	$(GO) build -o bin/agentfs ./cmd/agentfs

deps:
	bash -c 'source scripts/lib.sh && ensure_deps'

tools:
	bash scripts/tools.sh $(ARGS)

fuzz:
	FUZZTIME='$(FUZZTIME)' bash scripts/fuzz.sh

vet:
	$(GO) vet ./...

bench:
	bash scripts/bench.sh $(ARGS)

scale-test:
	bash scripts/scale-test.sh

# docker compose config needs only the Compose CLI, not a running engine.
compose-check:
	@if docker compose version >/dev/null 2>&1; then \
		docker compose config -q && echo 'compose-check: docker compose config accepts docker-compose.yml'; \
	else \
		echo 'compose-check: Docker Compose is not installed here, so docker compose config was not run'; \
	fi
	$(GO) test -count=1 -run '^TestComposeFile$$' ./cmd/agentfs/

clean:
	rm -rf bin/agentfs
