#!/usr/bin/python3
"""Draws the dashboard's data as one picture: each timeseries and stat panel of
charts/streamcar/files/grafana-dashboard.json, in the dashboard's order, plotted from the
query_range answers tests/chart/dashboard_test.py collected over its run.

    tests/chart/dashboard_test.py build/streamcar . --plot docs/dashboard.png

Usage: dashboard_plots.py PLOTS_JSON PNG (PLOTS_JSON as dashboard_test.py writes it). Needs
python3-matplotlib (`scripts/setup docs`), hence Debian's interpreter in the first line.
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = 4
# Grafana units -> (axis label, scale)
UNITS = {"s": ("seconds", 1), "ops": ("per second", 1), "percentunit": ("%", 100),
         "bytes": ("MiB", 1 / (1 << 20)), "short": ("", 1)}


def main(data_path, png_path):
    with open(data_path) as f:
        data = json.load(f)
    panels = [p for p in data["panels"] if p["type"] in ("timeseries", "stat") and p["series"]]
    rows = math.ceil(len(panels) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(COLUMNS * 4.6, rows * 3.1), squeeze=False)
    start = data["start"]
    for ax, panel in zip(axes.flat, panels):
        label, scale = UNITS.get(panel["unit"], (panel["unit"], 1))
        for series in panel["series"][:12]:
            t = [p[0] - start for p in series["points"]]
            v = [p[1] * scale for p in series["points"]]
            ax.plot(t, v, linewidth=1.2, label=series["legend"][:38])
        title = panel["title"] if panel["row"] in (None, "Overview") else f"{panel['row']}: {panel['title']}"
        if panel["type"] == "stat":
            last = [p[1] * scale for p in panel["series"][0]["points"] if not math.isnan(p[1])]
            if last:
                ax.text(0.97, 0.9, f"{last[-1]:.3g}", transform=ax.transAxes, ha="right", va="top",
                        fontsize=16, fontweight="bold")
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if panel["type"] == "timeseries":
            ax.legend(fontsize=6, loc="upper left", framealpha=0.6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("seconds into the run", fontsize=8)
    fig.suptitle("streamcar dashboard: the panels' queries over a 40 s run with retries and dead letters "
                 "(tests/chart/dashboard_test.py)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    fig.savefig(png_path, dpi=72)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
