#include "comparison_plot.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {
namespace {

constexpr double kChartWidth = 640;
constexpr double kChartHeight = 360;
constexpr double kLeft = 70;      // room for the y axis numbers and title
constexpr double kRight = 110;    // room for the line names
constexpr double kTop = 40;       // the chart title
constexpr double kBottom = 50;    // the x axis numbers and title
constexpr double kRowTitle = 36;  // the service's title above its two charts
constexpr double kGap = 20;

const char* colourOf(absl::string_view series) {
  if (series == "maglev") return "#1f77b4";
  if (series == "ring") return "#e6770b";
  if (series == "rendezvous") return "#2ca02c";
  if (series == "jump") return "#d62728";
  if (series == "modulo") return "#9467bd";
  return "#000000";  // ideal
}

std::string escaped(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten that gives about five ticks over `span`.
double niceStep(double span) {
  if (span <= 0) return 1;
  const double raw = span / 5;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * power) return factor * power;
  }
  return 10 * power;
}

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
};

struct Axes {
  std::string title;
  std::string x_title;
  std::string y_title;
  double x_low, x_high, y_low, y_high;
  int y_decimals;
  bool y_percent;
};

// One chart with its top-left corner at (x0, y0).
void drawChart(std::string& out, absl::string_view chart, absl::string_view service, double x0,
               double y0, const Axes& axes, const std::vector<Series>& series) {
  const double plot_left = x0 + kLeft;
  const double plot_right = x0 + kChartWidth - kRight;
  const double plot_top = y0 + kTop;
  const double plot_bottom = y0 + kChartHeight - kBottom;
  const double x_span = axes.x_high > axes.x_low ? axes.x_high - axes.x_low : 1;
  const double y_span = axes.y_high > axes.y_low ? axes.y_high - axes.y_low : 1;
  auto px = [&](double x) {
    return plot_left + (x - axes.x_low) / x_span * (plot_right - plot_left);
  };
  auto py = [&](double y) {
    return plot_bottom - (y - axes.y_low) / y_span * (plot_bottom - plot_top);
  };

  absl::StrAppendFormat(&out, "<g class=\"chart\" data-chart=\"%s\" data-service=\"%s\">\n", chart,
                        escaped(service));
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"15\" font-weight=\"bold\">%s"
                        "</text>\n",
                        plot_left, y0 + 22, escaped(axes.title));
  // Grid and y numbers.
  const double y_step = niceStep(y_span);
  for (double y = std::ceil(axes.y_low / y_step) * y_step; y <= axes.y_high + y_step * 1e-9;
       y += y_step) {
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>"
        "\n",
        plot_left, py(y), plot_right, py(y));
    absl::StrAppendFormat(
        &out,
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>"
        "\n",
        plot_left - 6, py(y) + 4,
        axes.y_percent ? absl::StrFormat("%.*f%%", axes.y_decimals, y * 100)
                       : absl::StrFormat("%.*f", axes.y_decimals, y));
  }
  const double x_step = std::max(1.0, std::round(niceStep(x_span)));
  for (double x = std::ceil(axes.x_low / x_step) * x_step; x <= axes.x_high + 1e-9; x += x_step) {
    absl::StrAppendFormat(&out,
                          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g"
                          "</text>\n",
                          px(x), plot_bottom + 16, x);
  }
  absl::StrAppendFormat(&out,
                        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
                        "stroke=\"#444444\"/>\n",
                        plot_left, plot_top, plot_right - plot_left, plot_bottom - plot_top);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s"
                        "</text>\n",
                        (plot_left + plot_right) / 2, plot_bottom + 36, escaped(axes.x_title));
  absl::StrAppendFormat(&out,
                        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n",
                        x0 + 16, (plot_top + plot_bottom) / 2, x0 + 16,
                        (plot_top + plot_bottom) / 2, escaped(axes.y_title));

  // Names at the lines' right ends, nudged apart so that none overlaps another.
  std::vector<std::pair<double, size_t>> label_at;
  for (size_t s = 0; s < series.size(); ++s) {
    if (!series[s].points.empty()) label_at.emplace_back(py(series[s].points.back().second), s);
  }
  std::sort(label_at.begin(), label_at.end());
  for (size_t i = 1; i < label_at.size(); ++i) {
    label_at[i].first = std::max(label_at[i].first, label_at[i - 1].first + 14);
  }
  std::vector<double> label_y(series.size(), 0);
  for (const auto& [y, s] : label_at) label_y[s] = y;

  for (size_t s = 0; s < series.size(); ++s) {
    const Series& line = series[s];
    const char* colour = colourOf(line.name);
    absl::StrAppendFormat(&out, "<g class=\"series\" data-series=\"%s\">\n", escaped(line.name));
    std::string points;
    for (const auto& [x, y] : line.points)
      absl::StrAppendFormat(&points, "%.1f,%.1f ", px(x), py(y));
    if (!points.empty()) points.pop_back();
    absl::StrAppendFormat(
        &out,
        "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>"
        "\n",
        points, colour, line.dashed ? " stroke-dasharray=\"6 4\"" : "");
    if (line.points.size() <= 40) {
      for (const auto& [x, y] : line.points) {
        absl::StrAppendFormat(&out, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                              px(x), py(y), colour);
      }
    }
    if (!line.points.empty()) {
      absl::StrAppendFormat(&out,
                            "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" font-size=\"12\" "
                            "fill=\"%s\">%s</text>\n",
                            plot_right + 6, label_y[s] + 4, colour, escaped(line.name));
    }
    absl::StrAppend(&out, "</g>\n");
  }
  absl::StrAppend(&out, "</g>\n");
}

}  // namespace

std::string comparisonSvg(const std::vector<ServiceComparison>& services) {
  const double width = 2 * kChartWidth + kGap;
  const double row_height = kRowTitle + kChartHeight + kGap;
  const double height = row_height * static_cast<double>(services.size()) + kGap;
  std::string out = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      width, height, width, height);
  for (size_t row = 0; row < services.size(); ++row) {
    const ServiceComparison& service = services[row];
    const double y0 = kGap / 2 + row_height * static_cast<double>(row);
    absl::StrAppendFormat(&out,
                          "<text x=\"10\" y=\"%.1f\" font-size=\"18\" font-weight=\"bold\">"
                          "service %s <tspan font-weight=\"normal\" font-size=\"14\">(%s)</tspan>"
                          "</text>\n",
                          y0 + 22, escaped(service.service), escaped(service.subtitle));

    // Balance: each algorithm's slots over ideal, backends sorted from least to most loaded.
    std::vector<Series> balance;
    double low = 1.0, high = 1.0;
    size_t most_backends = 1;
    for (const AlgorithmComparison& algorithm : service.algorithms) {
      std::vector<double> sorted = algorithm.slots_over_ideal;
      std::sort(sorted.begin(), sorted.end());
      Series line{std::string(toString(algorithm.algorithm)), {}, false};
      for (size_t i = 0; i < sorted.size(); ++i) {
        line.points.emplace_back(static_cast<double>(i + 1), sorted[i]);
        low = std::min(low, sorted[i]);
        high = std::max(high, sorted[i]);
      }
      most_backends = std::max(most_backends, sorted.size());
      balance.push_back(std::move(line));
    }
    const double pad = std::max(0.01, (high - low) * 0.08);
    Axes balance_axes{"Slots per backend over its ideal share",
                      "backends, sorted from least to most slots",
                      "slots / ideal",
                      1,
                      static_cast<double>(std::max<size_t>(most_backends, 2)),
                      std::max(0.0, low - pad),
                      high + pad,
                      2,
                      false};
    drawChart(out, "balance", service.service, 0, y0 + kRowTitle, balance_axes, balance);

    // Movement: slots moved as backends are removed, with the ideal beside.
    std::vector<Series> movement;
    double most_removed = 1, most_moved = 0.01;
    Series ideal{"ideal", {}, true};
    for (const AlgorithmComparison& algorithm : service.algorithms) {
      Series line{std::string(toString(algorithm.algorithm)), {}, false};
      for (const MovementPoint& point : algorithm.movement) {
        line.points.emplace_back(point.removed, point.moved);
        most_removed = std::max(most_removed, static_cast<double>(point.removed));
        most_moved = std::max(most_moved, point.moved);
      }
      if (ideal.points.empty()) {
        for (const MovementPoint& point : algorithm.movement) {
          ideal.points.emplace_back(point.removed, point.ideal);
        }
      }
      movement.push_back(std::move(line));
    }
    movement.push_back(std::move(ideal));
    const double y_high = std::min(1.0, most_moved * 1.08);
    Axes movement_axes{"Slots moved as backends are removed",
                       "backends removed",
                       "share of all slots moved",
                       0,
                       most_removed,
                       0,
                       y_high,
                       0,
                       true};
    if (y_high < 0.05) movement_axes.y_decimals = 1;
    drawChart(out, "movement", service.service, kChartWidth + kGap, y0 + kRowTitle, movement_axes,
              movement);
  }
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace berth
