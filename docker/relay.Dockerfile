# relay.Dockerfile — rtcedge-relay on Debian 12. The BPF program is compiled in the build
# stage (clang -target bpf, then embedded in the binary as a libbpf skeleton): no object is
# committed or copied. The runtime stage runs as root but gets no capability by itself: the
# chart adds exactly the ones helm/rtcedge/README.md lists. iproute2 finds the XDP interface
# from the node's IP; bpftool is there to inspect the pinned maps (docs/kubernetes.md).
#   docker build -f docker/relay.Dockerfile -t rtcedge-relay .        (from the repository root)

FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake ninja-build clang libclang-rt-14-dev g++ pkg-config bpftool \
      libbpf-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev \
      prometheus-cpp-dev libboost-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev \
      libnice-dev libsrtp2-dev libopus-dev libusrsctp-dev libspeexdsp-dev libhiredis-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    && cmake --build build --target rtcedge-relay \
    && strip --strip-debug build/bin/rtcedge-relay

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libbpf1 libelf1 zlib1g libyaml-cpp0.7 libspdlog1.10 libfmt9 libprometheus-cpp-core1.0 \
      libhiredis0.14 iproute2 bpftool \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/rtcedge-relay /usr/local/bin/rtcedge-relay
EXPOSE 3478/udp 9478/tcp
ENTRYPOINT ["/usr/local/bin/rtcedge-relay"]
CMD ["--config", "/etc/rtcedge/relay.yaml"]
