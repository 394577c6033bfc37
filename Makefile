# vpcnet build and test entry points. `make test` is what CI runs.
GO            ?= go
STATICCHECK   ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS          := ./...

.PHONY: all build test lint unit bench generate demo clean

all: build

build:
	$(GO) build $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

test: lint unit

generate:
	$(GO) generate $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./ipam/ ./checkpoint/...

demo:
	@echo "make demo arrives with the end-to-end issue (plugin, dataplane and VPC fabric); it is not built yet." >&2
	@exit 1
