#!/usr/bin/env python3
"""The scaling run of perf/scaling.sh (see there): the pipeline on SCALING_CORES cores and memif
throughput with SCALING_WORKERS workers, from a bundle of programs, libraries and drivers.

  scaling.py BUNDLE OUT_DIR

Writes OUT_DIR/scaling.json and OUT_DIR/scaling.md and prints the table.
"""
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dpdk_memory import memory_options  # noqa: E402

PIPELINE_MIB = 1024  # one pipeline_bench: its mbufs and three workers' connection tables


def driver_options(bundle):
    """EAL options that load the bundle's drivers, where the machine has no DPDK drivers of its
    own: the EAL also loads those of the directory it was built with, and the same driver
    registered twice stops it."""
    if glob.glob("/usr/lib/*/dpdk/pmds-*/librte_net_null.so*"):
        return [], "the machine's DPDK"
    return ["-d", os.path.join(bundle, "pmds")], "the bundle"


def eal_error(log_path):
    """The EAL's first error line (its last says only what errno was), else the last line."""
    with open(log_path) as log:
        lines = [line.strip() for line in log if line.strip()]
    errors = [line for line in lines if "Error" in line or "FATAL" in line]
    return (errors or lines or ["no output"])[0 if errors else -1]


def pipeline_copies(bench, drivers, count, memory):
    """`count` copies side by side, copy i on CPU i: each one's median Mpps of 3 repetitions,
    or raises RuntimeError with the first failure's last line."""
    with tempfile.TemporaryDirectory(prefix="berth-scaling-") as directory:
        processes = []
        for cpu in range(count):
            out = open(os.path.join(directory, "%d.json" % cpu), "w")
            log = open(os.path.join(directory, "%d.log" % cpu), "w")
            command = [bench, "--benchmark_filter=^BM_Pipeline/", "--benchmark_repetitions=3",
                       "--benchmark_report_aggregates_only=true", "--benchmark_format=json",
                       "--lcores", "0@%d" % cpu] + drivers + memory
            processes.append((subprocess.Popen(command, stdout=out, stderr=log), out, log, cpu))
        rates = []
        failure = None
        for process, out, log, cpu in processes:
            process.wait(timeout=600)
            out.close()
            log.close()
            if process.returncode != 0 and failure is None:
                failure = eal_error(os.path.join(directory, "%d.log" % cpu))
            if process.returncode == 0:
                with open(os.path.join(directory, "%d.json" % cpu)) as source:
                    for bench_result in json.load(source)["benchmarks"]:
                        if bench_result.get("aggregate_name") == "median":
                            rates.append(bench_result["items_per_second"] / 1e6)
        if failure is not None:
            raise RuntimeError(failure)
        return rates


def run_pipeline(bundle, counts, cpus, report):
    bench = os.path.join(bundle, "bin", "pipeline_bench")
    drivers = driver_options(bundle)[0]
    rows = []
    for count in counts:
        if count > cpus:
            report["skipped"].append("pipeline on %d cores: the machine has %d CPUs" % (count, cpus))
            continue
        memory, description = memory_options(count * PIPELINE_MIB // 2 + 64, PIPELINE_MIB)
        if "--no-huge" in memory:
            memory = []  # pipeline_bench's own default: --no-huge -m 768
        started = time.monotonic()
        try:
            rates = pipeline_copies(bench, drivers, count, memory)
        except RuntimeError as error:
            if not memory:
                raise
            report["fallbacks"].append("pipeline on %d cores: --no-huge, the EAL did not start on "
                                       "hugepages (%s)" % (count, error))
            description = "4 KiB pages (fallback)"
            rates = pipeline_copies(bench, drivers, count, [])
        rows.append({"cores": count, "total_mpps": sum(rates),
                     "median_mpps_per_core": statistics.median(rates),
                     "min_mpps": min(rates), "max_mpps": max(rates), "memory": description,
                     "seconds": round(time.monotonic() - started, 1)})
        print("pipeline %d core(s): %.1f Mpps (%s)" % (count, sum(rates), description), flush=True)
    single = rows[0]["total_mpps"] if rows and rows[0]["cores"] == 1 else None
    for row in rows:
        row["ratio_to_linear"] = row["total_mpps"] / (row["cores"] * single) if single else None
    report["pipeline"] = rows


def run_memif(bundle, workers, out_dir, report):
    if not workers:
        return
    env = dict(os.environ, THROUGHPUT_WORKERS=" ".join(map(str, workers)), THROUGHPUT_REPEATS="1",
               THROUGHPUT_SECONDS="4", THROUGHPUT_MODES="ipip", THROUGHPUT_FLOWS="1048576",
               THROUGHPUT_EAL=" ".join(driver_options(bundle)[0]))
    json_path = os.path.join(out_dir, "throughput.json")
    command = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "throughput_benchmark.py"),
               os.path.join(bundle, "bin", "berthd"), os.path.join(bundle, "bin", "berthgen"),
               json_path, os.path.join(out_dir, "throughput.md")]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        report["fallbacks"].append("memif: --no-huge, the run on hugepages failed (%s)" %
                                   (result.stdout + result.stderr).strip().splitlines()[-1:])
        env["THROUGHPUT_NO_HUGE"] = "1"
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError("memif throughput failed:\n" + result.stdout + result.stderr)
    with open(json_path) as source:
        throughput = json.load(source)
    report["skipped"] += ["memif with %d workers: it takes %d CPUs, the machine has %d" % (
        count, 2 * count, throughput["cpus"]) for count in throughput["skipped_workers"]]
    rows = [{"workers": row["workers"], "berthd_mpps": row["berthd"]["median_mpps"],
             "testpmd_mpps": row["testpmd"]["median_mpps"], "memory": throughput["memory"]}
            for row in throughput["rows"]]
    single = rows[0] if rows and rows[0]["workers"] == 1 else None
    for row in rows:
        for kind in ("berthd", "testpmd"):
            row[kind + "_ratio_to_linear"] = (
                row[kind + "_mpps"] / (row["workers"] * single[kind + "_mpps"])
                if single and single[kind + "_mpps"] else None)
    report["memif"] = rows


def table(report):
    ratio = lambda value: "%.2f" % value if value is not None else "-"
    lines = ["| cores | pipeline Mpps (per core) | ratio to linear |", "|---|---|---|"]
    for row in report["pipeline"]:
        lines.append("| %d | %.1f (%.1f) | %s |" % (row["cores"], row["total_mpps"],
                                                    row["median_mpps_per_core"],
                                                    ratio(row["ratio_to_linear"])))
    lines += ["", "| memif workers | berthd Mpps | ratio to linear | testpmd io Mpps | ratio to linear |",
              "|---|---|---|---|---|"]
    for row in report["memif"]:
        lines.append("| %d | %.2f | %s | %.2f | %s |" % (
            row["workers"], row["berthd_mpps"], ratio(row["berthd_ratio_to_linear"]),
            row["testpmd_mpps"], ratio(row["testpmd_ratio_to_linear"])))
    lines.append("")
    lines.append("CPUs: %d; drivers: %s; memory: %s; fallbacks: %s; skipped: %s; %.0f s in all" % (
        report["cpus"], report["drivers_from"], ", ".join(sorted({row["memory"] for row in report["pipeline"] +
                                          report["memif"]})) or "-",
        "; ".join(report["fallbacks"]) or "none", "; ".join(report["skipped"]) or "none",
        report["seconds"]))
    return "\n".join(lines) + "\n"


def main():
    bundle, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    cpus = len(os.sched_getaffinity(0))
    report = {"cpus": cpus, "fallbacks": [], "skipped": [], "pipeline": [], "memif": [],
              "drivers_from": driver_options(bundle)[1]}
    started = time.monotonic()
    run_pipeline(bundle, [int(n) for n in os.environ["SCALING_CORES"].split()], cpus, report)
    run_memif(bundle, [int(n) for n in os.environ["SCALING_WORKERS"].split()], out_dir, report)
    report["seconds"] = time.monotonic() - started
    with open(os.path.join(out_dir, "scaling.json"), "w") as out:
        json.dump(report, out, indent=2)
    text = table(report)
    with open(os.path.join(out_dir, "scaling.md"), "w") as out:
        out.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
