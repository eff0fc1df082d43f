# transceiver.Dockerfile — rtcedge-transceiver on Debian 12, as the unprivileged user 10001
# (the chart's runAsUser): it needs no capability and no root-owned file. The demo page is
# embedded in the binary.
#   docker build -f docker/transceiver.Dockerfile -t rtcedge-transceiver .   (from the repository root)

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
    && cmake --build build --target rtcedge-transceiver \
    && strip --strip-debug build/bin/rtcedge-transceiver

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libnice10 libglib2.0-0 libssl3 libopus0 libyaml-cpp0.7 libspdlog1.10 libfmt9 \
      libprometheus-cpp-core1.0 libhiredis0.14 libusrsctp2 libspeexdsp1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/rtcedge-transceiver /usr/local/bin/rtcedge-transceiver
USER 10001:10001
EXPOSE 8080/tcp
ENTRYPOINT ["/usr/local/bin/rtcedge-transceiver"]
CMD ["--config", "/etc/rtcedge/transceiver.yaml"]
