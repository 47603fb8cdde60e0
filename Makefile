# Sylk build, test and benchmark entry points.
GO        ?= go
BIN       ?= bin/sylk
PKGS      ?= ./...
FUZZTIME  ?= 5s
BENCHTIME ?= 1x

.PHONY: build test fuzz bench lint clean

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
