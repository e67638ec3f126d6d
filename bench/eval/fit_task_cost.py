#!/usr/bin/env python3
"""Fits core/estimate/task_cost.h's coefficients to task_cost_bench's measurements.

  fit_task_cost.py RUNS.jsonl FIXTURES.jsonl > task_cost_fit.json

RUNS: task_cost_bench lines with cpu_seconds (one thread), read_seconds (the passes' weight reads) and gemm_seconds
(the decoder's FLOPs), both at the reference throughputs (the estimate prices them from the worker's own rates).
cpu_seconds - read_seconds is fitted by non-negative least squares, relative to each run's seconds, on five terms:
gemm_seconds (its coefficient: gemm_scale), samples x layers, requests, requests x hidden x vocab, scored positions
x vocab. FIXTURES: --count-only lines over the whole task files (kept
in the output for task_fixture_stats.inc). Prints the coefficients, each run's measured and modelled seconds and
their ratio. No numpy: normal equations by Gaussian elimination, dropping a term whose coefficient comes out
negative and refitting.
"""
import json
import sys

TERMS = ["gemm_scale", "sample_layer_s", "request_s", "head_weight_s", "logit_s"]


def features(run):
    w = run["work"]
    return [run["gemm_seconds"], w["samples"] * run["layers"], w["requests"], w["requests"] * run["hidden"] * run["vocab"],
            w["scored_positions"] * run["vocab"]]


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if m[c][c] == 0:
            raise ValueError("singular: a term never varies")
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(runs):
    active = list(range(len(TERMS)))
    # Relative least squares: each run's residual divided by its measured seconds, so that the short tinyllama-a
    # runs weigh as much as the 7B-shape ones.
    while True:
        rows = [[features(r)[j] / r["cpu_seconds"] for j in active] for r in runs]
        ys = [(r["cpu_seconds"] - r["read_seconds"]) / r["cpu_seconds"] for r in runs]
        ata = [[sum(x[i] * x[j] for x in rows) for j in range(len(active))] for i in range(len(active))]
        aty = [sum(x[i] * y for x, y in zip(rows, ys)) for i in range(len(active))]
        coef = solve(ata, aty)
        negative = [j for j, c in zip(active, coef) if c < 0]
        if not negative:
            out = {t: 0.0 for t in TERMS}
            for j, c in zip(active, coef):
                out[TERMS[j]] = c
            return out
        active.remove(negative[0])


def main():
    runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    fixtures = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
    coef = fit(runs)
    checks = []
    for r in runs:
        modelled = r["read_seconds"] + sum(coef[t] * f for t, f in zip(TERMS, features(r)))
        checks.append({"model": r["model"].rsplit("/", 1)[-1], "task": r["task"], "limit": r["limit"],
                       "cpu_seconds": round(r["cpu_seconds"], 3), "wall_seconds": round(r["seconds"], 3),
                       "modelled_seconds": round(modelled, 3), "ratio": round(modelled / r["cpu_seconds"], 3)})
    print(json.dumps({"coefficients": coef, "runs": checks,
                      "fixtures": [{"task": f["task"], "examples": f["examples"], "work": f["work"]}
                                   for f in fixtures]}, indent=1))


if __name__ == "__main__":
    main()
