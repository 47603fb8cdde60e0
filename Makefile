# Sylk build, test and benchmark entry points.
GO        ?= go
BIN       ?= bin/sylk
PKGS      ?= ./...
FUZZTIME  ?= 5s
BENCHTIME ?= 1x

NATSJS    := cmd/sylk/testdata/natsjs

.PHONY: build test fuzz bench lint clean demo natsjs chromium

build:
	$(GO) build -o $(BIN) ./cmd/sylk

# The whole suite with the race detector, then a short fuzz run of the envelope decoder.
# The suite runs the official nats.js client (cmd/sylk's natsjs script): natsjs
# installs it first; and drives the web view in headless Chromium: chromium
# installs Debian's package when it is missing.
test: natsjs chromium
	$(GO) test -race -timeout 12m $(PKGS)
	$(MAKE) fuzz

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./schemas

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

lint:
	gofmt -l . | (! grep .) || (echo "gofmt: files above need formatting" && exit 1)
	$(GO) vet $(PKGS)

# node and npm (from Debian when the machine has none; that needs root), then
# the npm packages of the nats.js test, again whenever its lock file changes.
natsjs: $(NATSJS)/node_modules/.package-lock.json

$(NATSJS)/node_modules/.package-lock.json: $(NATSJS)/package-lock.json
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ]; then echo "natsjs: node and npm are missing; install them (apt-get install nodejs npm) or run make as root" >&2; exit 1; fi; \
		echo "natsjs: installing node and npm from Debian"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	fi
	cd $(NATSJS) && npm ci --no-audit --no-fund
	@touch $@

chromium:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
		if [ "$$(id -u)" != 0 ]; then echo "chromium: the browser is missing; install it (apt-get install chromium) or run make as root" >&2; exit 1; fi; \
		echo "chromium: installing Debian's chromium"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	fi

clean:
	rm -rf bin $(NATSJS)/node_modules

# The main job on embedded defaults: a fresh data directory, an embedded server
# with its agents, and a workflow (build, vet and test a Go module) run with no LLM.
demo: build
	@d=$$(mktemp -d); set -e; \
	$(BIN) --data $$d run examples/build-and-test.yaml; \
	echo; echo "the event log of that run (sylk tail --no-follow):"; \
	$(BIN) --data $$d tail --no-follow | cut -c1-160; rm -rf $$d
