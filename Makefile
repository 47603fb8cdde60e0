# Sylk build, test and benchmark entry points.
GO        ?= go
BIN       ?= bin/sylk
PKGS      ?= ./...
FUZZTIME  ?= 5s
BENCHTIME ?= 1x

.PHONY: build test fuzz bench lint clean demo

build:
	$(GO) build -o $(BIN) ./cmd/sylk

# The whole suite with the race detector, then a short fuzz run of the envelope decoder.
test:
	$(GO) test -race -timeout 12m $(PKGS)
	$(MAKE) fuzz

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./schemas

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

lint:
	gofmt -l . | (! grep .) || (echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet $(PKGS)

clean:
	rm -rf bin

# The main job on embedded defaults: a fresh data directory, an embedded server
# with its agents, and a workflow (build, vet and test a Go module) run with no LLM.
demo: build
	@d=$$(mktemp -d); set -e; \
	$(BIN) --data $$d run examples/build-and-test.yaml; \
	echo; echo "the event log of that run (sylk tail --no-follow):"; \
	$(BIN) --data $$d tail --no-follow | cut -c1-160; rm -rf $$d
