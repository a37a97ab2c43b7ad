# streamcar: a sidecar that delivers a Redis/Valkey stream consumer group to an HTTP handler.
# Multi-stage: Debian 12's -dev packages build it; the runtime carries only the shared
# libraries, CA certificates and the binary, and runs as a numeric non-root user.
# Build without a Docker engine: scripts/image (buildah).

FROM docker.io/library/debian:bookworm-slim AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      g++ cmake ninja-build pkg-config libhiredis-dev libyaml-cpp-dev prometheus-cpp-dev \
      libcpp-httplib-dev rapidjson-dev libssl-dev libsqlite3-dev libpq-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY sidecar ./sidecar
COPY bench ./bench
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMCAR_TESTS=OFF \
      -DSTREAMCAR_POSTGRES=ON >/dev/null \
 && cmake --build /build -j 2 --target streamcar \
 && strip /build/streamcar

FROM docker.io/library/debian:bookworm-slim
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="streamcar" \
      org.opencontainers.image.description="Kubernetes sidecar: a Redis/Valkey stream consumer group delivered to an HTTP handler" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/debian:bookworm-slim"
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libhiredis0.14 libyaml-cpp0.7 libprometheus-cpp-core1.0 libcpp-httplib0.11 libssl3 \
      libsqlite3-0 libpq5 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/*
COPY --from=build /build/streamcar /usr/local/bin/streamcar
COPY config/streamcar.example.yaml /etc/streamcar/streamcar.example.yaml
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["streamcar"]
CMD ["run"]
