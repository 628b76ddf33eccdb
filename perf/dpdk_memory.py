"""EAL memory options for the benchmarks: 2 MiB hugepages, as an appliance runs, when they can
be reserved (as root: raise vm.nr_hugepages, given back at exit, and mount hugetlbfs if need be);
4 KiB pages otherwise. With 4 KiB pages every connection-table bucket is also a TLB miss, which
halves berthd's rate on this kind of VM."""
import atexit
import os
import subprocess


def _free_and_total():
    with open("/proc/meminfo") as meminfo:
        info = dict(line.split(":", 1) for line in meminfo)
    return int(info["HugePages_Free"].split()[0]), int(info["HugePages_Total"].split()[0])


def _restore(count):
    with open("/proc/sys/vm/nr_hugepages", "w") as out:
        out.write(str(count))


def memory_options(pages_needed, megabytes):
    """(EAL options, a description) for processes that take `megabytes` each, all of them
    together needing `pages_needed` free 2 MiB pages."""
    try:
        free, total = _free_and_total()
        if free < pages_needed:
            with open("/proc/sys/vm/nr_hugepages", "w") as out:
                out.write(str(total + pages_needed - free))
            atexit.register(_restore, total)
        if _free_and_total()[0] < pages_needed:
            raise OSError("not enough hugepages")
        with open("/proc/mounts") as mounts:
            if not any(line.split()[2] == "hugetlbfs" for line in mounts):
                os.makedirs("/dev/hugepages", exist_ok=True)
                subprocess.run(["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"], check=True)
        return ["--in-memory", "-m", str(megabytes)], "2 MiB hugepages"
    except (OSError, KeyError, ValueError, subprocess.CalledProcessError):
        return ["--no-huge", "-m", str(megabytes)], "4 KiB pages (no hugepages could be reserved)"
