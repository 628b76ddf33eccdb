#pragma once

#include <string>
#include <vector>

#include "berth/maglev/comparison.h"

namespace berth {

// The charts of `berthctl analyze --algorithms ... --plot FILE.svg`: per service, slots per
// backend over ideal for each algorithm (backends sorted, so the spread reads as a slope), and
// the fraction of slots moved against the number of backends removed, beside the ideal. Each line
// carries its name at its end, in its colour, so nothing needs a legend. Plain SVG 1.1 that any
// browser shows; every chart is a <g class="chart" data-chart="balance|movement"> and every line
// a <g class="series" data-series="NAME">, so tests can read it back.
struct ServiceComparison {
  std::string service;
  std::string subtitle;  // "tcp 198.18.100.1:80, M=65537, N=8"
  std::vector<AlgorithmComparison> algorithms;
};

std::string comparisonSvg(const std::vector<ServiceComparison>& services);

}  // namespace berth
