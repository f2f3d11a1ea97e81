# Muster. `make run` serves on the embedded defaults; `make test` runs every
# check CI runs, installing what it needs (PostgreSQL, Chromium) when absent.
SHELL := /bin/bash
GO    ?= go
PKGS  := ./...

.PHONY: run build image generate check-generated vet staticcheck test test-go bench fuzz hostile-long clean

# ADDR=host:port chooses the address (default 127.0.0.1:7420).
ADDR ?=
run:
	$(GO) run ./cmd/muster serve $(if $(ADDR),--addr $(ADDR))

build:
	$(GO) build -buildvcs=auto -o bin/muster ./cmd/muster

# The container image (linux/amd64 and linux/arm64) without a container
# daemon: bin/muster-image/oci (OCI layout) and bin/muster-image/muster-oci.tar
# (oci-archive). Loading and running it: docs/operations.md, "Installing".
image:
	$(GO) run ./deploy/image -out bin/muster-image

generate:
	$(GO) generate ./api

# Fails when api/ is stale against openapi.yaml: regenerates, compares with
# what was there, and puts the old files back when they differ.
check-generated:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	cp api/api.gen.go api/openapi.yaml "$$tmp/" && \
	$(GO) generate ./api && \
	if cmp -s "$$tmp/api.gen.go" api/api.gen.go && cmp -s "$$tmp/openapi.yaml" api/openapi.yaml; then :; else \
	  cp "$$tmp/api.gen.go" "$$tmp/openapi.yaml" api/; \
	  echo "api/ is stale: run 'make generate' and commit the result"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

# The whole suite: static checks, then every test against real dependencies.
test: check-generated vet staticcheck
	@bash tests/run.sh

bench:
	@bash tests/bench.sh

# The hostile corpus with its long entries (the short corpus runs in `make test`).
hostile-long:
	MUSTER_HOSTILE_LONG=1 $(GO) test -count=1 -v ./tests/hostile

fuzz:
	$(GO) test ./core -run='^$$' -fuzz=FuzzParseSelector -fuzztime=60s
	$(GO) test ./core -run='^$$' -fuzz=FuzzParseRoute -fuzztime=60s
	$(GO) test ./sse -run='^$$' -fuzz=FuzzDecoder -fuzztime=60s
	$(GO) test ./core -run='^$$' -fuzz=FuzzCursorDecode -fuzztime=60s
	$(GO) test ./fleetstore -run='^$$' -fuzz=FuzzCompileSchema -fuzztime=60s
	$(GO) test ./fleetstore -run='^$$' -fuzz=FuzzCheckSpecShape -fuzztime=60s
	$(GO) test ./fleetstore -run='^$$' -fuzz=FuzzParseMintedName -fuzztime=60s
	$(GO) test ./fleetstore/dump -run='^$$' -fuzz=FuzzParseLine -fuzztime=60s
	$(GO) test ./fleetstore/dump -run='^$$' -fuzz=FuzzAppendLine -fuzztime=60s
	$(GO) test ./fleetstore/judge -run='^$$' -fuzz=FuzzServe -fuzztime=60s
	$(GO) test ./cmd/muster/app -run='^$$' -fuzz=FuzzLimits -fuzztime=60s
	cd clients/go && $(GO) test . -run='^$$' -fuzz=FuzzSSEReader -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzCheckOneJSONValue -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzBatchOps -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzDecodeBatch -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzFastBatch -fuzztime=60s
	$(GO) test ./cmd/muster/app -run='^$$' -fuzz=FuzzLoadConfig -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzHotPath -fuzztime=60s
	$(GO) test ./handlers -run='^$$' -fuzz=FuzzKnownPatterns -fuzztime=60s

clean:
	rm -rf bin muster-data
