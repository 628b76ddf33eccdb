"""Asking a running berthd for its counters with SIGUSR1, as the demo, the tests and the benchmarks
do. SIGUSR1's default action ends a process, and berthd only catches it once its main() has run:
under a sanitizer, on a loaded machine, loading the DPDK libraries alone can take longer than a
first report is wanted. So no signal is sent until the kernel says berthd catches it."""
import signal
import time

_SIGUSR1_MASK = 1 << (signal.SIGUSR1 - 1)


def catches_sigusr1(pid):
    """Whether the process has a handler for SIGUSR1, from the SigCgt mask in /proc/PID/status."""
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("SigCgt:"):
                    return (int(line.split()[1], 16) & _SIGUSR1_MASK) != 0
    except (FileNotFoundError, ProcessLookupError):
        pass
    return False


def latest_rx_packets(lines):
    """rx_packets from the newest counter report among berthd's stdout lines, or None."""
    for line in reversed(list(lines)):
        if line.split()[:1] == ["rx_packets"]:
            return int(line.split()[1])
    return None


def request_reports_until(process, lines, done, timeout, period=0.3):
    """Sends SIGUSR1 every `period` seconds, once berthd catches it, until done(rx_packets) holds
    for the newest report, the process exits or `timeout` seconds pass. `lines` is the list a
    reader thread extends with berthd's stdout. Returns the newest rx_packets seen, or None."""
    deadline = time.monotonic() + timeout
    received = None
    while time.monotonic() < deadline and process.poll() is None:
        time.sleep(period)
        if not catches_sigusr1(process.pid):
            continue
        process.send_signal(signal.SIGUSR1)
        time.sleep(0.1)
        received = latest_rx_packets(lines)
        if received is not None and done(received):
            break
    return received
