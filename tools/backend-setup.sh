#!/usr/bin/env bash
# Sets up this host as a backend of a berth service, as root: what each forwarding mode needs of
# a backend so that it takes the packets berthd sends it and answers the client directly
# (docs/quickstart.md). Run it on each backend; it is idempotent.
#
#   tools/backend-setup.sh MODE VIP [--gue-port N] [--decap kernel|userspace]
#
# MODE is the service's forwarding: l2dsr, ipip, gre or gue. Every mode:
#   - the VIP on the loopback, so the kernel takes packets to it as its own;
#   - arp_ignore=1 and arp_announce=2 (IPv4), so the backend never answers ARP for the VIP, which
#     would draw the VIP's traffic to it on a shared segment, nor uses the VIP as an ARP source.
# ipip, gre and gue also:
#   - the kernel's decapsulation: ipip's tunl0 (ip6tnl0 for IPv6 VIPs), gre's gre0, and for gue a
#     fou receiver on the service's gue_port (`ip fou add port N gue`) feeding tunl0;
#   - reverse-path filtering off (rp_filter=0) on the tunnel and for all interfaces: the
#     client's packet comes out of a tunnel device that holds no address, and the kernel's
#     reverse-path check, strict (1) or loose (2), drops every packet arriving on such a device
#     (counted as TcpExtIPReversePathFilter in nstat).
# A kernel without the module (modprobe fails) is named with what to do. --decap userspace
# puts tools/userspace_decap.py on a tun device in the kernel modules' place: for test hosts
# whose kernel lacks them, not for production.
set -euo pipefail

usage() {
  echo "usage: $0 l2dsr|ipip|gre|gue VIP [--gue-port N] [--decap kernel|userspace]" >&2
  exit 2
}
die() {
  echo "backend-setup: $*" >&2
  exit 1
}

[[ $# -ge 2 ]] || usage
mode=$1 vip=$2
shift 2
gue_port=6080 decap=kernel
while [[ $# -gt 0 ]]; do
  case $1 in
    --gue-port) gue_port=${2:?}; shift 2 ;;
    --decap) decap=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done
case $mode in l2dsr | ipip | gre | gue) ;; *) usage ;; esac
case $decap in kernel | userspace) ;; *) usage ;; esac
[[ $(id -u) -eq 0 ]] || die "run as root (it sets addresses, sysctls and tunnels)"

if [[ $vip == *:* ]]; then family=6 prefix=128; else family=4 prefix=32; fi
here=$(cd "$(dirname "$0")" && pwd)

sysctl_set() { sysctl -qw "$1=$2" || die "sysctl $1=$2 failed"; }

# The VIP on lo, once.
if ! ip -"$family" addr show dev lo | grep -qw "$vip/$prefix"; then
  ip -"$family" addr add "$vip/$prefix" dev lo
fi
ip link set lo up
if [[ $family == 4 ]]; then
  sysctl_set net.ipv4.conf.all.arp_ignore 1
  sysctl_set net.ipv4.conf.all.arp_announce 2
fi
[[ $mode == l2dsr ]] && { echo "backend-setup: l2dsr: $vip on lo, ARP for it ignored"; exit 0; }

# No reverse-path filtering where the client's packets come out: the kernel applies the larger
# of "all" and the interface's own value.
open_rp_filter() {
  [[ $family == 4 ]] || return 0
  sysctl_set net.ipv4.conf.all.rp_filter 0
  sysctl_set "net.ipv4.conf.$1.rp_filter" 0
}

# A kernel tunnel device: present once its module is loaded (in every network namespace).
kernel_device() {
  local module=$1 device=$2
  if ! ip link show "$device" >/dev/null 2>&1; then
    command -v modprobe >/dev/null ||
      die "$module is not loaded and there is no modprobe to load it (Debian's kmod); $mode backends need the $module module"
    local why
    why=$(modprobe "$module" 2>&1) ||
      die "this kernel has no $module module ($why); $mode backends need it (a kernel built with it, or linux-modules-extra); on a test host without it, --decap userspace"
    ip link show "$device" >/dev/null 2>&1 || die "$module is loaded but $device did not appear"
  fi
  ip link set "$device" up
  open_rp_filter "$device"
}

if [[ $decap == userspace ]]; then
  device=berth-$mode
  [[ -c /dev/net/tun ]] || die "no /dev/net/tun for the userspace decapsulator"
  ip link show "$device" >/dev/null 2>&1 || ip tuntap add dev "$device" mode tun
  ip link set "$device" up
  open_rp_filter "$device"
  pidfile=/run/berth-decap-$mode-$(ip netns identify $$ 2>/dev/null || true).pid
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "backend-setup: $mode: the userspace decapsulator already runs ($pidfile)"
    exit 0
  fi
  setsid /usr/bin/python3 "$here/userspace_decap.py" --tun "$device" --mode "$mode" \
    --gue-port "$gue_port" --pidfile "$pidfile" </dev/null >/dev/null 2>&1 &
  for _ in $(seq 50); do [[ -s $pidfile ]] && break; sleep 0.1; done
  [[ -s $pidfile ]] || die "the userspace decapsulator did not start"
  echo "backend-setup: $mode: $vip on lo, decapsulated in userspace onto $device (pid $(cat "$pidfile"))"
  exit 0
fi

case $mode in
  ipip)
    if [[ $family == 4 ]]; then kernel_device ipip tunl0; else kernel_device ip6_tunnel ip6tnl0; fi
    ;;
  gre)
    kernel_device ip_gre gre0
    ;;
  gue)
    if ! ip fou show 2>/dev/null | grep -q "port $gue_port gue"; then
      command -v modprobe >/dev/null && modprobe fou 2>/dev/null
      why=$(ip fou add port "$gue_port" gue 2>&1) ||
        die "this kernel cannot receive GUE ($why); gue backends need the fou module; on a test host without it, --decap userspace"
    fi
    if [[ $family == 4 ]]; then kernel_device ipip tunl0; else kernel_device ip6_tunnel ip6tnl0; fi
    ;;
esac
echo "backend-setup: $mode: $vip on lo, decapsulated by the kernel"
