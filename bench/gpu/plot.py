#!/usr/bin/env python3
"""Draw bench/gpu/results.json as an SVG bar chart (no plotting library needed).
    python3 bench/gpu/plot.py bench/gpu/results.json bench/gpu/results.svg"""
import json
import statistics
import sys

res = json.load(open(sys.argv[1]))
panels = [
    ("train_2gpu", "wall_s", "2-GPU NCCL training, wall (s)"),
    ("train_2gpu", "first_allreduce_s", "launch -> first all_reduce (s)"),
    ("true_x8", "wall_s", "8 x /bin/true, launch+reap (s)"),
    ("train_2gpu", "launcher_peak_rss_kib", "launcher peak RSS (MiB)"),
    ("failfast", "wall_s", "rank exits 3: launch -> exit (s)"),
]
colors = {"ddplaunch": "#2b7bba", "torchrun": "#d95f02"}
W, H, pad = 200, 220, 40
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(panels)}" height="{H + 60}" '
       f'font-family="sans-serif" font-size="11">']
svg.append(f'<text x="8" y="16" font-size="13">ddplaunch vs torchrun {res.get("torch", "")} on '
           f'{len(res.get("gpus", []))}x {res.get("gpus", ["?"])[0]}, NCCL {res.get("nccl", "")}, '
           f'median of {res.get("reps")} runs, {res.get("date", "")}</text>')
for i, (case, key, title) in enumerate(panels):
    x0 = i * W
    vals = {}
    for name in ("ddplaunch", "torchrun"):
        xs = [r[key] for r in res.get(case, {}).get(name, []) if r.get(key) is not None]
        v = statistics.median(xs) if xs else 0
        vals[name] = v / 1024 if key.endswith("kib") else v
    top = max(vals.values()) or 1
    svg.append(f'<text x="{x0 + 10}" y="40">{title}</text>')
    for j, (name, v) in enumerate(vals.items()):
        h = (H - pad - 30) * v / top
        bx = x0 + 30 + j * 70
        by = H - h
        svg.append(f'<rect x="{bx}" y="{by:.1f}" width="50" height="{h:.1f}" fill="{colors[name]}"/>')
        label = f"{v:.0f}" if v >= 100 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"
        svg.append(f'<text x="{bx + 25}" y="{by - 4:.1f}" text-anchor="middle">{label}</text>')
        svg.append(f'<text x="{bx + 25}" y="{H + 14}" text-anchor="middle">{name}</text>')
svg.append("</svg>")
open(sys.argv[2], "w").write("\n".join(svg) + "\n")
