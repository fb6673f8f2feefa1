"""`linkscope check --fleet`: every node of a torchrun (or `srun torchrun`) job checked at once.

Every rank runs this. First each node's own items, as `check` judges one machine (its local rank 0 probes it;
the node's ranks time an all-reduce among themselves); then node-pair bandwidth in rounds (`bench.fleet`), so that a
slow node or NIC is named rather than "the ring was slow"; then one all-reduce over every rank against the model.
Rank 0 stores one run (kind check, label fleet) with every node's items and hostname, created before the
measurements so that a node that dies leaves an incomplete run naming it, and judges each node against its own
history when `--since` asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from linkscope.check import fleet_rules, rules
from linkscope.check.items import CheckItem, Status, Thresholds, verdict
from linkscope.hardware.errors import FaultError, UserError
from linkscope.hardware.serialize import system_dict
from linkscope.hardware.system import System
from linkscope.results.records import CollectiveRow, RunInfo
from linkscope.results.store import ResultStore

_PAIR = {"quick": (1 << 20, 5, 2), "full": (64 << 20, 20, 3)}
"""(bytes, messages per exchange, repeats) of the node-pair rounds."""
_ALL_REDUCE = {"quick": (1 << 20, 5), "full": (256 << 20, 20)}
_WINDOW_UNITS = {"d": 86400, "h": 3600, "m": 60}


@dataclass
class FleetOptions:
    """What `check --fleet` was asked."""

    expect: str | None = None
    mode: str = "quick"
    thresholds: Thresholds = field(default_factory=Thresholds)
    db_path: str | None = None
    since: str | None = None
    drop_pct: float = 10.0
    hosts: list[str] = field(default_factory=list)
    rounds: int = 3
    timeout_s: float = 300.0


@dataclass
class FleetResult:
    """The fleet's verdict, each node's, and the stored run."""

    verdict: Status
    run_id: str
    expected_system: str
    items: list[CheckItem]
    """Fleet-wide items (membership, the all-reduce over every rank)."""
    nodes: list[dict[str, Any]]
    """Per node: node index, hostname, verdict, items (CheckItem dicts), pair figure, NVLink domain."""
    racks: list[dict[str, Any]] = field(default_factory=list)
    """The nodes grouped by the NVLink domain (rack) their GPUs joined, each group with its verdict."""

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        return {"verdict": self.verdict, "run_id": self.run_id, "expected_system": self.expected_system,
                "items": [i.to_dict() for i in self.items], "nodes": self.nodes, "racks": self.racks}


def window_seconds(since: str) -> float:
    """`7d`, `12h`, `30m` -> seconds; UserError otherwise."""
    text = since.strip().lower()
    try:
        value = float(text[:-1])
    except ValueError:
        value = -1.0
    if text[-1:] not in _WINDOW_UNITS or not 0 < value < 1e6:
        raise UserError(f"--since: expected a window such as 7d, 12h or 30m, got '{since}'")
    return value * _WINDOW_UNITS[text[-1]]


def check_options(opts: FleetOptions) -> FleetOptions:
    """Refuse bad options before any rank joins (so every rank fails alike, at once)."""
    opts.thresholds.validated()
    if opts.since is not None:
        window_seconds(opts.since)
    check_fleet_numbers(opts.drop_pct, opts.rounds)
    return opts


def check_fleet_numbers(drop_pct: float, rounds: int) -> None:
    """--drop-pct and --rounds in range (NaN refused): checked on every `check`, with --fleet or not, so a bad
    value is never accepted silently."""
    if not 0.0 < drop_pct < 100.0:  # False for NaN too
        raise UserError(f"--drop-pct must be between 0 and 100 (exclusive), got {drop_pct:g}")
    if not 1 <= rounds <= 1000:
        raise UserError(f"--rounds must be between 1 and 1000, got {rounds}")


def run_fleet_check(opts: FleetOptions) -> FleetResult | None:
    """Run on every rank of the job; rank 0 returns the result, the others None."""
    from linkscope.bench import torchrun
    from linkscope.bench.comm import init_rank, resolve_backend
    from linkscope.bench.layout import torchrun_env

    check_options(opts)
    env = torchrun_env()
    if env is None:
        raise UserError("check --fleet runs on every node at once: start it with torchrun on each node (or srun "
                        "torchrun under Slurm); see docs/multinode.md")
    ctx = init_rank(env, resolve_backend("auto"), "env://", opts.timeout_s + 60.0, torchrun.store_publisher(env.rank))
    return _FleetRun(opts, ctx).run()


class _FleetRun:
    """One rank's part of the check; rank 0 also records."""

    def __init__(self, opts: FleetOptions, ctx: Any) -> None:
        self.opts, self.ctx = opts, ctx
        infos = ctx.gather_infos()
        from linkscope.bench.layout import node_keys, rank_groups

        keys = node_keys(infos)
        order = list(dict.fromkeys(keys))
        self.node_of = [order.index(k) for k in keys]
        self.local_of = [i.local_rank for i in infos]
        hosts = [next(i.host for i, k in zip(infos, keys) if k == key) for key in order]
        # Nodes are named by hostname; where hostnames repeat (several agents on one machine) by host and node.
        self.hosts = hosts if len(set(hosts)) == len(hosts) else [f"{h}:node{n}" for n, h in enumerate(hosts)]
        self.groups = rank_groups(infos)
        self.store: ResultStore | None = None
        self.info: RunInfo | None = None
        self.node_items: list[dict[str, Any]] = []

    def where(self, rank: int) -> str:
        """`rank 3 on node2 (host)`: how messages name a rank."""
        node = self.node_of[rank]
        return f"rank {rank} on node{node} ({self.hosts[node]})"

    def run(self) -> FleetResult | None:
        expected, local = self._local_items()
        self.node_items = self._gather(local)
        if self.ctx.rank == 0:
            assert expected is not None  # global rank 0 is its node's local rank 0
            self._begin(expected)
        try:
            result = self._measure_and_judge(expected)
        except FaultError:
            raise
        except Exception as exc:  # a node died or broke off: name it, keep what is stored
            raise FaultError(self._fault(exc)) from None
        self.ctx.close()
        return result

    # ---- node-local items ---------------------------------------------------------------------------------

    def _local_items(self) -> tuple[System | None, dict[str, Any] | None]:
        """Local rank 0 probes its node and judges it (the node's other ranks neither probe nor judge); with the
        items goes the NVLink domain (fabric cluster and clique) the node's GPUs joined, to group nodes per rack."""
        from linkscope.check.run import resolve_expected
        from linkscope.probe import probe_machine, to_system

        if self.local_of[self.ctx.rank] != 0:
            return None, None
        probe = probe_machine()
        probed = to_system(probe)
        expected = resolve_expected(self.opts.expect, probed.system, probed.reason)
        items = rules.gpu_items(probe, probed.system, expected) + rules.nvlink_items(probe, probed.system, expected)
        items += [rules.topology_item(probed.system, expected)]
        items += rules.fabric_items(probe, expected)
        items += rules.scale_out_items(probe, expected, thresholds=self.opts.thresholds)
        return expected, {"items": [i.to_dict() for i in items], "nvlink_domain": fleet_rules.domain_key(probe)}

    def _gather(self, local: dict[str, Any] | None) -> list[dict[str, Any]]:
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.ctx.world
        dist.all_gather_object(gathered, local, group=self.ctx.ctrl)
        per_node: list[dict[str, Any]] = [{"node": n, "hostname": h, "items": [], "nvlink_domain": None}
                                          for n, h in enumerate(self.hosts)]
        for rank, payload in enumerate(gathered):
            if payload is not None:
                per_node[self.node_of[rank]].update(items=list(payload["items"]),
                                                    nvlink_domain=payload["nvlink_domain"])
        return per_node

    # ---- measurements -------------------------------------------------------------------------------------

    def _measure_and_judge(self, expected: System | None) -> FleetResult | None:
        from linkscope.bench.fleet import measure_rounds, time_all_reduce

        size, iters, repeats = _PAIR[self.opts.mode]
        self.ctx.progress.advance()
        intra = self._intra_node(expected)
        pairs = [vars(p) for p in measure_rounds(self.ctx, self.node_of, self.local_of, size, iters, repeats,
                                                 self.opts.rounds)]
        if self.ctx.rank == 0:
            self._save_partial(pairs)
        ar_size, ar_iters = _ALL_REDUCE[self.opts.mode]
        timed = time_all_reduce(self.ctx, ar_size, ar_iters)
        self.ctx.progress.advance()
        if self.ctx.rank != 0 or expected is None:
            return None
        return self._judge(expected, pairs, intra, _all_reduce_row(ar_size, ar_iters, self.ctx.world, timed))

    def _intra_node(self, expected: System | None) -> dict[int, CheckItem]:
        """Each node's ranks time an all-reduce among themselves (a node of one rank has nothing to time); rank 0
        judges every node's figure."""
        import torch.distributed as dist

        from linkscope.bench.fleet import time_all_reduce

        members = [[r for r in range(self.ctx.world) if self.node_of[r] == n] for n in range(len(self.hosts))]
        groups = [dist.new_group(m) if len(m) > 1 else None for m in members]  # every rank creates every group
        mine = self.node_of[self.ctx.rank]
        size, iters = _ALL_REDUCE[self.opts.mode]
        result = (0.0, 0.0, 0.0)
        if groups[mine] is not None:
            result = time_all_reduce(self.ctx, size, iters, groups[mine], len(members[mine]))
        rates: list[Any] = [None] * self.ctx.world
        dist.all_gather_object(rates, result, group=self.ctx.ctrl)
        if self.ctx.rank != 0 or expected is None:
            return {}
        return {n: _intra_item(expected, rates[m[0]], len(m), size, self.opts.thresholds)
                for n, m in enumerate(members)}

    # ---- recording (rank 0) -------------------------------------------------------------------------------

    def _begin(self, expected: System) -> None:
        self.store = ResultStore(self.opts.db_path or None)
        self.info = RunInfo(kind="check", label="fleet", hosts=self.hosts, world_size=self.ctx.world,
                            nodes=len(self.hosts), backend=self.ctx.backend, groups=self.groups,
                            config={"mode": self.opts.mode, "expect": self.opts.expect, "fleet": True,
                                    "rounds": self.opts.rounds, "since": self.opts.since},
                            extra={"check": {"expected_system": expected.id, "expected": system_dict(expected)},
                                   "fleet": {"nodes": self.node_items, "pairs": []}})
        self.store.create_run(self.info)

    def _save_partial(self, pairs: list[dict[str, Any]]) -> None:
        assert self.store is not None and self.info is not None
        self.info.extra["fleet"]["pairs"] = pairs
        self.store.update_run(self.info.run_id, extra=self.info.extra)

    def _fault(self, exc: Exception) -> str:
        from linkscope.bench.torchrun import read_progress

        values = read_progress(self.ctx.world) or []
        low = min(values) if values else 0
        behind = [r for r, v in enumerate(values) if v == low] if values and max(values) != low else []
        named = "; ".join(self.where(r) for r in behind)
        message = (f"fleet check broken off: {named} fell behind the others; " if named else
                   "fleet check broken off: ") + f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if self.store is not None and self.info is not None:
            self.store.finish_run(self.info.run_id, "incomplete", message)
            message += f" (partial results stored as run {self.info.run_id} in {self.store.where})"
        return message

    def _judge(self, expected: System, pairs: list[dict[str, Any]], intra: dict[int, CheckItem],
               row: CollectiveRow) -> FleetResult:
        assert self.store is not None and self.info is not None
        opts = self.opts
        pair_items = fleet_rules.pair_items(pairs, self.hosts, opts.thresholds)
        figures = fleet_rules.node_figures(pairs, len(self.hosts))
        domains = [node["nvlink_domain"] for node in self.node_items]
        in_domain = fleet_rules.node_figures(fleet_rules.same_domain_pairs(pairs, domains), len(self.hosts))
        history = _history(self.store, opts.since, self.info.run_id) if opts.since else {}
        for node in self.node_items:
            n, host = node["node"], node["hostname"]
            extra = [intra[n]] + ([pair_items[n]] if n in pair_items else [])
            if expected.domain_spans_nodes and n in in_domain:
                extra.append(_domain_link_item(expected, in_domain[n], _PAIR[opts.mode][0], opts.thresholds))
            else:
                extra.append(_nic_item(expected, figures.get(n), opts.thresholds))
            if opts.since:
                extra.append(fleet_rules.history_item(host, figures.get(n), history.get(host, []), opts.drop_pct,
                                                      opts.since))
            node["items"] = node["items"] + [i.to_dict() for i in extra]
            node["pair_gb_per_s"] = figures.get(n)
            node["verdict"] = verdict([_item(d) for d in node["items"]])
        fleet_items = [fleet_rules.membership_item(self.hosts, opts.hosts, _slurm_nodes())]
        fleet_items += _fleet_all_reduce(expected, row, len(self.hosts), opts.thresholds)
        status = verdict(fleet_items + [_item(d) for node in self.node_items for d in node["items"]])
        self.info.extra["check"].update(verdict=status, items=[i.to_dict() for i in fleet_items])
        self.info.extra["fleet"].update(nodes=self.node_items, pairs=pairs,
                                        node_verdicts={n["hostname"]: n["verdict"] for n in self.node_items})
        self.store.add_rows(self.info.run_id, [row])
        self.store.update_run(self.info.run_id, extra=self.info.extra)
        self.store.finish_run(self.info.run_id, "complete")
        self.store.close()
        return FleetResult(status, self.info.run_id, expected.id, fleet_items, self.node_items,
                           fleet_rules.racks(self.node_items))


def _item(d: dict[str, Any]) -> CheckItem:
    return CheckItem(**{k: d[k] for k in ("name", "status", "measured", "expected", "unit", "source", "fix")})


def _intra_item(expected: System, timed: tuple[float, float, float], ranks: int, size: int,
                thresholds: Thresholds) -> CheckItem:
    name, src = f"node.all_reduce.busbw@{size}B", f"model prediction for {expected.id} at the node's ranks"
    if ranks < 2:
        return CheckItem(name, "SKIP", None, None, "GB/s", src, "one rank on this node: nothing to reduce within it")
    from linkscope.model.comm.predict import predict_sizes

    try:
        (pred,) = predict_sizes(expected, "all_reduce", [size], gpus=min(ranks, expected.node.gpus))
    except UserError as exc:
        return CheckItem(name, "SKIP", round(timed[2], 3), None, "GB/s", src, f"no model prediction: {exc}")
    pct = timed[2] / pred.busbw * 100.0 if pred.busbw > 0 else 0.0
    status = thresholds.status(pct)
    return CheckItem(name, status, round(timed[2], 3), round(pred.busbw, 3), "GB/s", src, "" if status == "PASS" else
                     f"{pct:.0f}% of the prediction inside the node: NVLink or PCIe (see the node's nvlink items)")


def _nic_item(expected: System, figure: float | None, thresholds: Thresholds) -> CheckItem:
    per_gpu = expected.node.scale_out_gb_per_s_per_gpu()
    src = f"{expected.id}'s NIC rate per GPU"
    if figure is None or not per_gpu:
        return CheckItem("fleet.pairs.vs_nic", "SKIP", figure and round(figure, 3), per_gpu, "GB/s", src,
                         "no NIC rate in the expected System" if figure is not None else "no pair measured")
    pct = figure / per_gpu * 100.0
    status = thresholds.status(pct)
    return CheckItem("fleet.pairs.vs_nic", status, round(figure, 3), round(per_gpu, 3), "GB/s", src,
                     "" if status == "PASS" else f"{pct:.0f}% of the NIC rate: GPUDirect RDMA off, a port down, or "
                                                 "a slow link (see scale_out items and `nccl-log`)")


def _domain_link_item(expected: System, figure: float, size: int, thresholds: Thresholds) -> CheckItem:
    """A node's exchanges with the other trays of its NVLink domain against the model's NVLink figure for a
    two-rank send/recv of that size; near the NIC figure instead, the tray fell back to the NIC."""
    from linkscope.model.comm.collectives import collective_time
    from linkscope.model.comm.tiers import comm_tiers

    tiers = comm_tiers(expected)
    nvlink = size / float(collective_time("sendrecv", tiers, [size], 2, 1, labels=False).time_us[0]) / 1e3
    nic = None if tiers.fabric == "none" or tiers.nic_node_gb_per_s != tiers.nic_node_gb_per_s else \
        size / float(collective_time("sendrecv", tiers, [size], 2, 2, labels=False).time_us[0]) / 1e3
    return fleet_rules.domain_link_item(figure, nvlink, nic, expected.id, thresholds)


def _all_reduce_row(size: int, iters: int, world: int, timed: tuple[float, float, float]) -> CollectiveRow:
    time_us, algbw, busbw = timed
    return CollectiveRow(op="all_reduce", size_bytes=max(4, size // 4 * 4), count=max(1, size // 4), dtype="float",
                         redop="sum", root=-1, placement="out_of_place", time_us=time_us, algbw=algbw, busbw=busbw,
                         nwrong=None, world_size=world, iters=iters)


def _fleet_all_reduce(expected: System, row: CollectiveRow, nodes: int, thresholds: Thresholds) -> list[CheckItem]:
    from linkscope.check.run import predictions

    predicted, reason = predictions(expected.with_nodes(max(nodes, expected.nodes)), [row], row.world_size)
    items = rules.collective_items([row], predicted, reason, thresholds,
                                   f"model prediction for {expected.id} x {nodes} nodes at {row.world_size} ranks")
    return [i for i in items if i.name != "collective.correctness"]


def _slurm_nodes() -> int | None:
    import os

    raw = os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES")
    return int(raw) if raw and raw.isdigit() else None


def _history(store: ResultStore, since: str, current: str) -> dict[str, list[float]]:
    """Per hostname, its pair figure in every earlier complete fleet check within the window."""
    cutoff = datetime.now(timezone.utc) - timedelta(seconds=window_seconds(since))
    out: dict[str, list[float]] = {}
    for summary in store.list_runs(kind="check", label="fleet"):
        if summary.run_id == current or summary.status != "complete":
            continue
        try:
            started = datetime.fromisoformat(summary.started_at)
        except ValueError:
            continue
        if started < cutoff:
            continue
        for node in (store.get_run(summary.run_id).extra.get("fleet") or {}).get("nodes", []):
            if isinstance(node.get("pair_gb_per_s"), (int, float)):
                out.setdefault(node["hostname"], []).append(float(node["pair_gb_per_s"]))
    return out


