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

# The main job on embedded defaults: a fresh data directory, a few events
# appended through an embedded server, then read back with tail.
demo: build
	@d=$$(mktemp -d); set -e; \
	$(BIN) --data $$d publish --session demo --type user_input --payload '{"text":"add input validation to the config loader"}'; \
	$(BIN) --data $$d publish --session demo --type task_dispatch --source orchestrator --target engineer \
	  --payload '{"dag_id":"d1","node_id":"build","attempt":1,"agent":"engineer","tool":"exec","args":{"argv":["go","build","./..."]}}'; \
	$(BIN) --data $$d publish --session demo --type task_complete --source engineer --target orchestrator \
	  --payload '{"dag_id":"d1","node_id":"build","attempt":1,"summary":"built"}'; \
	echo; $(BIN) --data $$d tail --no-follow; rm -rf $$d
