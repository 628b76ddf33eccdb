#!/usr/bin/env python3
"""Two builds of perf/pipeline_bench, run in turn on one machine: each round runs one, then the
other (the order alternating from round to round), so that a neighbour's load on a shared machine
weighs on both alike. Prints, per benchmark, each build's median over the rounds and the median of
the rounds' ratios (new / baseline), as a table and as JSON.

  perf/compare_pipeline.py BASELINE_BENCH NEW_BENCH [--rounds N] [--json FILE]
"""
import argparse
import json
import statistics
import subprocess
import sys

BENCHMARKS = ["BM_Pipeline", "BM_PipelineConntrackHits", "BM_RefillAndTransmitOnly"]
FIGURES = ["cycles_per_packet", "items_per_second"]


def run(bench):
    pattern = "^(" + "|".join(BENCHMARKS) + ")(/|$)"
    result = subprocess.run(
        [bench, f"--benchmark_filter={pattern}", "--benchmark_format=json"],
        capture_output=True, text=True, check=True)
    # Names carry their settings ("BM_Pipeline/min_time:1.000").
    return {b["name"].split("/")[0]: b for b in json.loads(result.stdout)["benchmarks"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("baseline")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()

    figures = {side: {(b, f): [] for b in BENCHMARKS for f in FIGURES}
               for side in ("baseline", "new")}
    ratios = {(b, f): [] for b in BENCHMARKS for f in FIGURES}
    for round_index in range(args.rounds):
        order = ["baseline", "new"] if round_index % 2 == 0 else ["new", "baseline"]
        results = {side: run(getattr(args, side)) for side in order}
        for key in ratios:
            bench, figure = key
            values = {side: results[side][bench][figure] for side in order}
            for side, value in values.items():
                figures[side][key].append(value)
            ratios[key].append(values["new"] / values["baseline"])

    report = []
    print(f"{'benchmark':28} {'figure':18} {'baseline':>10} {'new':>10} {'new/base':>9}")
    for key, values in ratios.items():
        bench, figure = key
        row = {"benchmark": bench, "figure": figure,
               "baseline": statistics.median(figures["baseline"][key]),
               "new": statistics.median(figures["new"][key]),
               "ratio": statistics.median(values), "rounds": args.rounds}
        report.append(row)
        scale = 1e6 if figure == "items_per_second" else 1
        print(f"{bench:28} {figure if scale == 1 else 'Mpps':18} {row['baseline'] / scale:10.1f} "
              f"{row['new'] / scale:10.1f} {row['ratio']:9.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
