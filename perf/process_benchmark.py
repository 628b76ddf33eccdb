#!/usr/bin/env python3
"""The whole-process benchmark: berthd forwarding a capture of 1,048,576 flows (64-byte frames)
on one worker core, next to dpdk-testpmd io-forwarding the same capture on the same core, both
on net_pcap vdevs (rx_pcap=capture, tx_pcap=output) and measured the same way in one run:
packets per second = frames / (last - first output timestamp), which the PMD stamps as it
writes. The pcap PMD reads and writes the files through libpcap, which bounds both; the
comparison over a fast path (memif) is berthgen's.

Prints a table and writes JSON. Usage: process_benchmark.py BERTHD BERTHCTL OUT.json
"""
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpdk_memory import memory_options  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from berthd_reports import request_reports_until  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "perf", "process_bench.yaml")
FLOWS = 1 << 20
REPEATS = int(os.environ.get("PROCESS_REPEATS", "3"))
HUGEPAGES_NEEDED = 768  # 2 MiB pages: 1 GiB for each process's -m 1024, with room to spare
MEMORY, PAGES = memory_options(HUGEPAGES_NEEDED, 1024)
EAL = MEMORY + ["--no-pci", "--lcores", "0@0,1@1", "--log-level", "lib.eal:error"]


def output_rate(path):
    """(frames, frames per second between the first and last timestamps) of a pcap file."""
    with open(path, "rb") as source:
        data = source.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    scale = 1e-9 if magic == 0xA1B23C4D else 1e-6
    offset, count, first, last = 24, 0, None, None
    while offset + 16 <= len(data):
        seconds, fraction, length = struct.unpack_from("<III", data, offset)
        stamp = seconds + fraction * scale
        first = stamp if first is None else first
        last = stamp
        count += 1
        offset += 16 + length
    return count, (count - 1) / (last - first) if count > 1 and last > first else 0.0


def wait_for_size(path, size, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and os.path.getsize(path) >= size:
            return True
        time.sleep(0.1)
    return False


def run_testpmd(vdev, prefix, stop_when):
    process = subprocess.Popen(["dpdk-testpmd"] + EAL + ["--file-prefix", prefix, "--vdev", vdev, "--",
                                "--forward-mode=io", "--no-flush-rx", "-a", "--stats-period", "1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    try:
        stop_when()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree("/var/run/dpdk/" + prefix, ignore_errors=True)
    return lines


def run_berthd(berthd, vdev, stop_when, counters_path):
    process = subprocess.Popen([berthd] + MEMORY + ["--vdev", vdev, "--", "--config", CONFIG, "--counters-json",
                                counters_path, "--control-socket", counters_path + ".sock"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    try:
        stop_when(process, lines)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree("/var/run/dpdk/berth-process-bench", ignore_errors=True)
    with open(counters_path) as source:
        return json.load(source), lines


def until_all_received(process, lines):
    request_reports_until(process, lines, lambda received: received >= FLOWS, 120, period=0.5)


def main():
    berthd, berthctl, out_path = sys.argv[1:4]
    directory = tempfile.mkdtemp(prefix="berth-process-bench-")
    try:
        capture = os.path.join(directory, "flows.pcap")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "pcap_demo.py"), "--berthd", berthd,
                        "--berthctl", berthctl, "--config", CONFIG, "--flows", str(FLOWS),
                        "--packets", str(FLOWS), "--write-capture", capture], check=True)
        results = {"flows": FLOWS, "frame_bytes": 64}

        # Alternate the two programs, so that both see the same spells of a noisy machine, and
        # report each one's median.
        testpmd_rates, berthd_rates, window_rates, frames = [], [], [], {}
        for _ in range(REPEATS):
            testpmd_out = os.path.join(directory, "testpmd.pcap")
            run_testpmd("net_pcap0,rx_pcap=%s,tx_pcap=%s" % (capture, testpmd_out),
                        "berth-bench-testpmd",
                        lambda: wait_for_size(testpmd_out, 24 + FLOWS * 76, 120) and time.sleep(0.5))
            frames["testpmd"], rate = output_rate(testpmd_out)
            testpmd_rates.append(rate)
            os.remove(testpmd_out)

            berthd_out = os.path.join(directory, "berthd.pcap")
            counters, _ = run_berthd(berthd, "net_pcap0,rx_pcap=%s,tx_pcap=%s" % (capture, berthd_out),
                                     until_all_received, os.path.join(directory, "file.json"))
            frames["berthd"], rate = output_rate(berthd_out)
            berthd_rates.append(rate)
            window_rates.append(counters["rx_pps"])
            os.remove(berthd_out)
        results["file"] = {"repeats": REPEATS, "memory": PAGES,
                           "testpmd_pps": statistics.median(testpmd_rates), "testpmd_runs": testpmd_rates,
                           "testpmd_frames": frames["testpmd"],
                           "berthd_pps": statistics.median(berthd_rates), "berthd_runs": berthd_rates,
                           "berthd_frames": frames["berthd"],
                           "berthd_rx_window_pps": statistics.median(window_rates)}
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    with open(out_path, "w") as out:
        json.dump(results, out, indent=2)
    print("whole process, one worker core, 64-byte frames of %d flows (ipip, 100 backends, "
          "connection tracking on), %s, median of %d runs each:" % (FLOWS, PAGES, REPEATS))
    print("  %-44s %12s %12s %8s" % ("mode", "testpmd io", "berthd", "ratio"))
    for mode, label in (("file", "net_pcap file in, file out"),):
        row = results[mode]
        ratio = row["berthd_pps"] / row["testpmd_pps"] if row["testpmd_pps"] else 0.0
        print("  %-44s %9.2f Mpps %9.2f Mpps %7.2f" % (label, row["testpmd_pps"] / 1e6,
                                                       row["berthd_pps"] / 1e6, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
