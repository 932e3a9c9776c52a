#!/usr/bin/env python3
"""Draws normkit_bench's JSON output as a chart: throughput against working-set size, one panel per
operation, every implementation measured, under the copy bandwidth of the same bytes (the roof).

    normkit_bench --benchmark_out=normkit.json --benchmark_out_format=json
    python3 bench/plot.py normkit.json                  # writes normkit.png
    python3 bench/plot.py normkit.json -o chart.png --type bf16 --title "my laptop"

The working set of a row is the bytes one pass moves: x and y for forward and training; x, dy and
dx for backward. The roof at a working set is the copy rate normkit_bench divided by to get that
row's roofline (bytes_per_second / roofline), so a point on the roof has a roofline of 1.
Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""

import argparse
import json
import pathlib
import statistics
import sys
from collections import defaultdict

ELEMENT_BYTES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2}
NORMS = ["LayerNorm", "RMSNorm"]
PASSES = ["forward", "training", "backward"]
# Implementations in legend order, with their look: normkit per instruction set, then the peers.
STYLES = {
    "avx512": dict(color="tab:blue", marker="o", label="normkit avx512"),
    "avx2": dict(color="tab:green", marker="s", label="normkit avx2"),
    "neon": dict(color="tab:blue", marker="o", label="normkit neon"),
    "scalar": dict(color="tab:olive", marker="^", label="normkit scalar"),
    "onednn": dict(color="tab:red", marker="D", linestyle="--", label="oneDNN"),
    "naive": dict(color="tab:gray", marker="v", linestyle=":", label="naive loop"),
}


def load(path):
    """Returns the run's context and {(norm, pass, type, rows, features, impl): (bytes/s, roofline)}.

    Repetitions of a benchmark are reduced to their median; aggregate rows, failed rows and the
    copy rows (the roof comes from each row's own roofline) are skipped."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    samples = defaultdict(list)
    for row in data.get("benchmarks", []):
        if row.get("run_type") == "aggregate" or row.get("error_occurred"):
            continue
        if "bytes_per_second" not in row or "roofline" not in row:
            continue
        parts = row.get("run_name", row["name"]).split("/")
        if len(parts) < 5 or parts[0] not in NORMS or parts[2] not in ELEMENT_BYTES:
            continue
        norm, pass_, type_, shape, impl = parts[:5]
        rows, features = (int(n) for n in shape.split("x"))
        samples[(norm, pass_, type_, rows, features, impl)].append(
            (row["bytes_per_second"], row["roofline"]))
    results = {
        key: (statistics.median(s[0] for s in values), statistics.median(s[1] for s in values))
        for key, values in samples.items()
    }
    return data.get("context", {}), results


def working_set(pass_, type_, rows, features):
    return rows * features * ELEMENT_BYTES[type_] * (3 if pass_ == "backward" else 2)


def size_label(nbytes, _position=None):
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


def plot(context, results, type_, output, title):
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"plot.py: {sys.executable} has no matplotlib: apt-get install python3-matplotlib, "
                 "then run this with /usr/bin/python3")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    rows = [n for n in NORMS if any(k[0] == n and k[2] == type_ for k in results)]
    cols = [p for p in PASSES if any(k[1] == p and k[2] == type_ for k in results)]
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(5 * len(cols), 4.2 * len(rows)),
                             sharex=True, sharey=True, squeeze=False)
    sizes = [working_set(k[1], type_, k[3], k[4]) for k in results if k[2] == type_]
    xlim = (min(sizes) / 2, max(sizes) * 2)
    # Powers of 16 bytes on the x axis, or of 4 or 2 when the sizes span too little for three.
    for step in (16, 4, 2):
        ticks = [step**e for e in range(40) if xlim[0] <= step**e <= xlim[1]]
        if len(ticks) >= 3:
            break
    handles = {}
    for r, norm in enumerate(rows):
        for c, pass_ in enumerate(cols):
            ax = axes[r][c]
            mine = {k: v for k, v in results.items() if k[:3] == (norm, pass_, type_)}
            # The roof: one copy rate per shape (the same for every implementation of it).
            roof = {}
            for (_, _, _, nr, nf, _), (rate, roofline) in mine.items():
                if roofline > 0:
                    roof.setdefault(working_set(pass_, type_, nr, nf), (nr, nf, rate / roofline))
            xs = sorted(roof)
            (line,) = ax.plot(xs, [roof[x][2] / 2**30 for x in xs], color="black", linewidth=2.5,
                              marker="_", markersize=16, markeredgewidth=2.5, label="copy of the same bytes (roof)")
            handles.setdefault(line.get_label(), line)
            for x in xs:
                ax.annotate(f"{roof[x][0]}x{roof[x][1]}", (x, roof[x][2] / 2**30), textcoords="offset points",
                            xytext=(0, 6), ha="center", fontsize=7, rotation=90, color="dimgray")
            for impl, style in STYLES.items():
                points = sorted((working_set(pass_, type_, k[3], k[4]), v[0] / 2**30)
                                for k, v in mine.items() if k[5] == impl)
                if not points:
                    continue
                (line,) = ax.plot(*zip(*points), linewidth=1.5, markersize=5,
                                  **{"linestyle": "-", **style})
                handles.setdefault(line.get_label(), line)
            ax.set_xscale("log", base=2)
            ax.set_xlim(*xlim)
            ax.set_yscale("log")
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_major_formatter(FuncFormatter(size_label))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{norm} {pass_}")
            if r == len(rows) - 1:
                ax.set_xlabel("working set: bytes one pass moves")
            if c == 0:
                ax.set_ylabel("throughput (GiB/s)")
    low, high = axes[0][0].get_ylim()  # shared by every panel
    axes[0][0].set_ylim(low, high * 3)  # room for the shape names above the roof

    if title is None:
        cpus = context.get("num_cpus", "?")
        mhz = context.get("mhz_per_cpu", "?")
        title = f"{cpus} CPUs at {mhz} MHz"
    onednn = context.get("onednn", "")
    fig.suptitle(f"normkit_bench, {type_}, one thread: {title}"
                 + (f"  (oneDNN {onednn})" if onednn and "not built" not in onednn else ""))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    fig.savefig(output, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", type=pathlib.Path, help="normkit_bench --benchmark_out=... --benchmark_out_format=json")
    parser.add_argument("-o", "--output", type=pathlib.Path, help="PNG to write (default: the JSON's name, .png)")
    parser.add_argument("--type", choices=sorted(ELEMENT_BYTES), help="element type to draw (default: f32 if measured)")
    parser.add_argument("--title", help="what the machine is, for the title (default: CPU count and clock)")
    args = parser.parse_args()

    context, results = load(args.json)
    types = {k[2] for k in results}
    if not types:
        sys.exit(f"plot.py: no LayerNorm/RMSNorm rows with bytes_per_second and roofline in {args.json}")
    type_ = args.type or ("f32" if "f32" in types else sorted(types)[0])
    if type_ not in types:
        sys.exit(f"plot.py: no {type_} rows in {args.json} (it has {', '.join(sorted(types))})")
    output = args.output or args.json.with_suffix(".png")
    plot(context, results, type_, output, args.title)
    print(f"plot.py: wrote {output}")


if __name__ == "__main__":
    main()
