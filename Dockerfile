# berth on Debian 12: the image builds berth's Debian package with the same install script as
# README and CI, and installs that package (docs/appliance.md).
#
#   docker build -t berth .
#   docker run ... berth                  # berthd -- --config /etc/berth/berth.yaml (mount it)
#   docker run --rm --entrypoint berthctl berth analyze --config /etc/berth/demo.yaml
#
# A deployment that drives NICs through DPDK needs the host's hugepages and devices:
#   docker run --privileged --network host \
#     -v /dev/hugepages:/dev/hugepages -v /sys/bus/pci:/sys/bus/pci -v /sys/devices:/sys/devices \
#     -v /etc/berth:/etc/berth:ro berth ...
# or, without --privileged: --cap-add IPC_LOCK --cap-add NET_ADMIN --cap-add NET_RAW and
# --device /dev/vfio/vfio --device /dev/vfio/<group> for a vfio-pci bound NIC. A port with an
# exception interface (docs/exception-path.md) also needs --device /dev/net/tun (tap) or
# /dev/vhost-net (virtio-user).
FROM debian:bookworm

COPY tools/install-deps.sh /tmp/install-deps.sh
RUN bash /tmp/install-deps.sh && rm -rf /var/lib/apt/lists/*

COPY . /src
WORKDIR /src
# The package is built from the release build (tools/package.sh), then installed as an
# operator installs it, with its dependencies from Debian.
RUN rm -rf build && bash tools/build.sh && bash tools/package.sh \
    && apt-get update -q \
    && apt-get install -y -q --no-install-recommends ./build/package/berth_*_amd64.deb \
    && rm -rf /var/lib/apt/lists/* \
    && cp config/demo.yaml /etc/berth/demo.yaml

# The daemon; arguments replace the default: [EAL options] -- --config FILE [berthd flags].
ENTRYPOINT ["/usr/sbin/berthd"]
CMD ["--", "--config", "/etc/berth/berth.yaml"]
