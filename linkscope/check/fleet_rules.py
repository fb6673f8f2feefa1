"""The verdict rules of `check --fleet`, as pure functions of what the node-pair rounds measured and what the store
remembers: which node is slow (against the fleet and against its own history), and which nodes never joined."""

from __future__ import annotations

from statistics import median
from typing import Any

from linkscope.check.items import CheckItem, Status, Thresholds, verdict
from linkscope.check.rules import CHANNEL_FIX, FABRIC_FIX, IMEX_FIX

PAIR_ITEM = "fleet.pairs.bandwidth"
HISTORY_ITEM = "fleet.pairs.history"
DOMAIN_ITEM = "fleet.pairs.vs_nvlink"
NO_DOMAIN = "no NVLink domain across nodes"


def node_figures(pairs: list[dict[str, Any]], nodes: int) -> dict[int, float]:
    """Per node: the median over its rounds of the pair's figure, where a round's figure is its weakest rank pair
    (one slow NIC of eight is a slow pair). Nodes without a pair are absent."""
    per_round: dict[tuple[int, int], float] = {}
    for p in pairs:
        for node in (p["node_a"], p["node_b"]):
            key = (node, p["round"])
            per_round[key] = min(per_round.get(key, p["gb_per_s"]), p["gb_per_s"])
    out = {}
    for node in range(nodes):
        values = [v for (n, _), v in per_round.items() if n == node]
        if values:
            out[node] = float(median(values))
    return out


def pair_items(pairs: list[dict[str, Any]], hosts: list[str], thresholds: Thresholds) -> dict[int, CheckItem]:
    """Each node's pair bandwidth against the fleet's median node; the slow node named with its partners."""
    figures = node_figures(pairs, len(hosts))
    src = "median node of the fleet (user thresholds)"
    if len(figures) < 3:
        reason = "fewer than 3 nodes measured: a slow pair cannot be told from a slow node"
        return {n: CheckItem(PAIR_ITEM, "SKIP", round(v, 3), None, "GB/s", src, reason) for n, v in figures.items()}
    fleet = float(median(figures.values()))
    items = {}
    for node, value in figures.items():
        pct = value / fleet * 100.0 if fleet > 0 else 0.0
        status = thresholds.status(pct)
        partners = sorted({hosts[p["node_b"] if p["node_a"] == node else p["node_a"]] for p in pairs
                           if node in (p["node_a"], p["node_b"])})
        fix = "" if status == "PASS" else (
            f"{hosts[node]} at {pct:.0f}% of the fleet's median node, slow with every partner "
            f"({', '.join(partners)}): its NIC, cable or switch port (check `ibstat`, link errors, "
            "`ethtool -S`), or a busy host")
        items[node] = CheckItem(PAIR_ITEM, status, round(value, 3), round(fleet, 3), "GB/s", src, fix)
    return items


def history_item(host: str, value: float | None, past: list[float], drop_pct: float, window: str) -> CheckItem:
    """A node's pair figure against the median of its own stored fleet checks within the window."""
    src = f"{host}'s median over its fleet checks of the last {window}"
    if value is None or not past:
        return CheckItem(HISTORY_ITEM, "SKIP", value, None, "GB/s", src,
                         "no earlier fleet check of this node in the window" if value is not None else
                         "no pair figure measured now")
    reference = float(median(past))
    drop = (1.0 - value / reference) * 100.0 if reference > 0 else 0.0
    if drop > drop_pct:
        return CheckItem(HISTORY_ITEM, "FAIL", round(value, 3), round(reference, 3), "GB/s", src,
                         f"{drop:.0f}% below its own median of {len(past)} check(s) (limit {drop_pct:g}%): what "
                         "changed on it (driver, firmware, cable, NCCL_* settings)?")
    return CheckItem(HISTORY_ITEM, "PASS", round(value, 3), round(reference, 3), "GB/s", src)


def membership_item(joined: list[str], expected_hosts: list[str], expected_count: int | None) -> CheckItem:
    """Whether every node that should be in the check joined it (--hosts, or Slurm's node count)."""
    src = "--hosts" if expected_hosts else "SLURM_JOB_NUM_NODES"
    if expected_hosts:
        missing = [h for h in expected_hosts if h not in joined]
        if missing:
            return CheckItem("fleet.nodes", "FAIL", len(joined), len(expected_hosts), "nodes", src,
                             f"never joined: {', '.join(missing)} (down, unreachable, or its agent failed to start)")
        return CheckItem("fleet.nodes", "PASS", len(joined), len(expected_hosts), "nodes", src)
    if expected_count is not None and len(joined) < expected_count:
        return CheckItem("fleet.nodes", "FAIL", len(joined), expected_count, "nodes", src,
                         f"{expected_count - len(joined)} node(s) never joined; give --hosts to have them named")
    if not expected_count:
        src = "--hosts or SLURM_JOB_NUM_NODES"
    return CheckItem("fleet.nodes", "PASS" if expected_count else "SKIP", len(joined), expected_count, "nodes", src,
                     "" if expected_count else "no --hosts or Slurm node count to compare with")


def node_verdicts(per_node: dict[str, list[CheckItem]]) -> dict[str, Status]:
    """One verdict per node."""
    return {host: verdict(items) for host, items in per_node.items()}


def domain_key(probe: Any) -> str | None:
    """`cluster/clique` of the NVLink domain every GPU of a probed node joined; None where they joined none (or
    not one)."""
    fabric = getattr(probe, "fabric", None)
    if fabric is None or not fabric.in_one_domain:
        return None
    (cluster, clique), = fabric.cliques
    return f"{cluster}/{clique}"


def same_domain_pairs(pairs: list[dict[str, Any]], domains: list[str | None]) -> list[dict[str, Any]]:
    """The node pairs whose two nodes joined the same NVLink domain."""
    return [p for p in pairs if domains[p["node_a"]] is not None and domains[p["node_a"]] == domains[p["node_b"]]]


def domain_link_item(figure: float, nvlink: float, nic: float | None, system: str, thresholds: Thresholds) -> CheckItem:
    """A tray's exchanges with trays of its own NVLink domain against the model's NVLink figure; where it is nearer
    the NIC's figure than NVLink's, the tray's traffic went over the NIC, and the fix says where to look."""
    src = f"model prediction for a 2-rank send/recv over {system}'s NVLink"
    pct = figure / nvlink * 100.0 if nvlink > 0 else 0.0
    status = thresholds.status(pct)
    if status == "PASS":
        return CheckItem(DOMAIN_ITEM, status, round(figure, 3), round(nvlink, 3), "GB/s", src)
    fell_back = nic is not None and abs(figure - nic) < abs(figure - nvlink)
    what = (f"{pct:.0f}% of NVLink, near the NIC's {nic:.1f} GB/s: this tray fell back to the NIC for its own rack"
            if fell_back and nic is not None else f"{pct:.0f}% of NVLink between trays of one domain")
    return CheckItem(DOMAIN_ITEM, "FAIL" if fell_back else status, round(figure, 3), round(nvlink, 3), "GB/s", src,
                     f"{what}. {IMEX_FIX}; {CHANNEL_FIX}; {FABRIC_FIX}")


def racks(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes grouped by the NVLink domain (rack) they joined, in order of first appearance, each with the worst of
    its nodes' verdicts; nodes in no domain form a group of their own."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        groups.setdefault(node.get("nvlink_domain") or NO_DOMAIN, []).append(node)
    out = []
    for key, members in groups.items():
        statuses: list[Status] = [m.get("verdict", "SKIP") for m in members]
        out.append({"nvlink_domain": key, "hosts": [m["hostname"] for m in members],
                    "verdict": verdict([CheckItem("rack", s, None, None, "", "") for s in statuses])})
    return out
