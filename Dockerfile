# berth on Debian 12, built by the same install script as README and CI.
#
#   docker build -t berth .
#   docker run ... berth                  # berthd -- --config /etc/berth/berth.yaml (mount it)
#   docker run --rm --entrypoint berthctl berth analyze --config /etc/berth/demo.yaml
#
# A deployment that drives NICs through DPDK needs the host's hugepages and devices:
#   docker run --privileged --network host \
#     -v /dev/hugepages:/dev/hugepages -v /sys/bus/pci:/sys/bus/pci -v /sys/devices:/sys/devices \
#     -v /etc/berth:/etc/berth:ro berth ...
# or, without --privileged: --cap-add IPC_LOCK --cap-add NET_ADMIN --cap-add SYS_RAWIO and
# --device /dev/vfio/vfio --device /dev/vfio/<group> for a vfio-pci bound NIC. A port with an
# exception interface (docs/exception-path.md) also needs NET_ADMIN and --device /dev/net/tun
# (tap) or /dev/vhost-net (virtio-user).
FROM debian:bookworm

COPY tools/install-deps.sh /tmp/install-deps.sh
RUN bash /tmp/install-deps.sh && rm -rf /var/lib/apt/lists/*

COPY . /src
WORKDIR /src
RUN rm -rf build && bash tools/build.sh && meson install -C build \
    && mkdir -p /etc/berth && cp config/*.yaml /etc/berth/

# The daemon; arguments replace the default: [EAL options] -- --config FILE [berthd flags].
ENTRYPOINT ["/usr/local/bin/berthd"]
CMD ["--", "--config", "/etc/berth/berth.yaml"]
