"""LATS runs by what their searches did and cost: how often a search found a finish of reward 1, the iterations
and nodes a question, and the calls, generated and evaluated tokens and seconds a question of each kind of
call (expanding a node, valuing a child, writing a reflection), from the records' `lats` fields."""

KINDS = ("expand", "value", "reflect")


def search_rows(runs: dict[str, list[dict]]) -> list[dict[str, str]]:
    """One row per run and kind of call, for the runs whose records hold LATS searches; empty without one."""
    rows = []
    for name, records in runs.items():
        searched = [r["lats"] for r in records if r.get("lats")]
        if not searched:
            continue
        n = len(searched)
        found = sum(s["ended"] == "found" for s in searched) / n
        head = {"run": name, "searches": str(n), "found": f"{found:.0%}"}
        head |= {"iterations/q": f"{sum(s['iterations'] for s in searched) / n:.1f}"}
        head |= {"nodes/q": f"{sum(len(s['nodes']) for s in searched) / n:.1f}"}
        for kind in KINDS:
            costs = [s["cost"].get(kind, {}) for s in searched]
            rows.append(
                head
                | {"kind": kind, "calls/q": f"{sum(c.get('calls', 0) for c in costs) / n:.1f}"}
                | {"gen tok/q": f"{sum(c.get('generated', 0) for c in costs) / n:.0f}"}
                | {"eval tok/q": f"{sum(c.get('evaluated', 0) for c in costs) / n:.0f}"}
                | {"s/q": f"{sum(c.get('seconds', 0.0) for c in costs) / n:.1f}"}
            )
    return rows


SEARCHES_NOTE = (
    "LATS's searches: found is the share that reached a finish of reward 1; each kind of call's cost a question "
    "(expand: the sampled steps; value: the value prompts; reflect: the reflections on failed trajectories)"
)
