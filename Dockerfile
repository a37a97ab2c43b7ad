# streamcar: a sidecar that delivers a Redis/Valkey stream consumer group to an HTTP handler.
# Multi-stage: Debian 12's -dev packages build it; the final stage is FROM scratch and holds only
# what the binary loads and reads (scripts/image-rootfs): the stripped binary, its shared libraries
# and the loader, CA certificates, passwd/group entries for the non-root user and nsswitch.conf.
# No shell, no package manager (debugging without a shell: docs/image.md).
# Build without a Docker engine: scripts/image (buildah); releases: scripts/release.
#   VERSION  the project's version (project() in CMakeLists.txt); the build fails if the binary differs
#   REVISION the commit (git rev-parse --short=12 HEAD), in the binary and the labels
#   CREATED  when it was built (RFC 3339)
#   BINARY   where the binary comes from: "compiled" (the default) compiles it here from the
#            sources; "prebuilt" takes one already built on Debian 12 from the context's
#            prebuilt/streamcar (scripts/image --binary FILE puts it there). CI ships the binary
#            its test suite has just run, rather than compiling a second one.
ARG BINARY=compiled
# The libraries it links, as Debian's -dev packages: both ways install them, so that
# scripts/image-rootfs finds the same shared libraries to copy.
ARG LIBRARIES="libhiredis-dev libyaml-cpp-dev prometheus-cpp-dev libcpp-httplib-dev rapidjson-dev libssl-dev libsqlite3-dev libpq-dev"

FROM docker.io/library/debian:bookworm-slim AS compiled
ARG LIBRARIES
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build pkg-config libcli11-dev ${LIBRARIES} ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY sidecar ./sidecar
COPY bench ./bench
ARG REVISION=unknown
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMCAR_TESTS=OFF \
      -DSTREAMCAR_POSTGRES=ON -DSTREAMCAR_REVISION="${REVISION}" >/dev/null \
 && cmake --build /build -j 2 --target streamcar \
 && strip /build/streamcar

# No compiler: binutils for strip and image-rootfs's readelf.
FROM docker.io/library/debian:bookworm-slim AS prebuilt
ARG LIBRARIES
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      binutils ${LIBRARIES} ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY prebuilt/streamcar /build/streamcar
RUN strip /build/streamcar

FROM ${BINARY} AS binary
ARG VERSION
RUN says="$(/build/streamcar version)" \
 && echo "$says" | grep -qwF -- "${VERSION:?pass --build-arg VERSION=<project version>}" \
 || { echo "the binary says '$says', the build was given VERSION=${VERSION}" >&2; exit 1; }
COPY scripts/image-rootfs /usr/local/bin/image-rootfs
RUN image-rootfs /build/streamcar /rootfs
# The man page and the completion scripts, written by the binary from its own command definitions
# (docs/cli.md): here, where both ways of getting the binary meet, so each image has them. A few
# kilobytes; `man` and the shells themselves come with the image a user copies them into.
RUN mkdir -p /rootfs/usr/share/man/man1 /rootfs/usr/share/bash-completion/completions \
      /rootfs/usr/share/zsh/vendor-completions \
 && /build/streamcar man | gzip -9n >/rootfs/usr/share/man/man1/streamcar.1.gz \
 && /build/streamcar completion bash >/rootfs/usr/share/bash-completion/completions/streamcar \
 && /build/streamcar completion zsh >/rootfs/usr/share/zsh/vendor-completions/_streamcar

FROM scratch
ARG VERSION
ARG REVISION=unknown
ARG CREATED
LABEL org.opencontainers.image.title="streamcar" \
      org.opencontainers.image.description="Kubernetes sidecar: a Redis/Valkey stream consumer group delivered to an HTTP handler" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=binary /rootfs/ /
COPY config/streamcar.example.yaml /etc/streamcar/streamcar.example.yaml
ENV PATH=/usr/local/bin
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["streamcar"]
CMD ["run"]
