# syntax=docker/dockerfile:1
# One image recipe for both binaries: BINARY selects the main package (worker or starter).
#   docker build --build-arg BINARY=worker --build-arg VERSION=$(cat VERSION) -t runnerflow-worker .
# VERSION must be the VERSION file's release (the build checks it): it becomes the image's
# org.opencontainers.image.version label; the binary reads the file itself (--version).
# The result is a static binary on distroless "nonroot" (uid 65532): no shell, no package
# manager, nothing to patch but the binary itself.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG BINARY=worker
ARG VERSION
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN test "$VERSION" = "$(cat VERSION)" || { echo "build with --build-arg VERSION=$(cat VERSION) (got '$VERSION')" >&2; exit 1; }
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/runnerflow ./${BINARY}

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION
LABEL org.opencontainers.image.version=$VERSION org.opencontainers.image.title=runnerflow
COPY --from=build /out/runnerflow /usr/local/bin/runnerflow
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/runnerflow"]
