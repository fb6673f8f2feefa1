"""`linkscope check`: an acceptance test of this machine. Parsing and printing only; logic in linkscope.check."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from linkscope.cli.options import DbOpt, OversubscribeOpt
from linkscope.cli.common import console, print_json, user_errors
from linkscope.hardware.errors import FaultError, UserError, check_output_path, write_output
from linkscope.hardware.limits import MAX_TIMEOUT_S, check_number

_COLOURS = {"PASS": "green", "WARN": "yellow", "FAIL": "red", "SKIP": "dim"}


@user_errors
def check(
    expect: Optional[str] = typer.Option(None, "--expect", help="Offering, preset or System file to check against "
                                                                "(default: the probed System)."),
    quick: bool = typer.Option(False, "--quick", help="Up to 1 MiB, few iterations (the default): bandwidth below "
                                                      "the plateau is never PASSed."),
    full: bool = typer.Option(False, "--full", help="Up to the plateau of the expected System (4 GiB+ on NVSwitch, "
                                                    "a published floor's size), bounded by free GPU memory; 256 MiB on "
                                                    "CPU ranks; nccl-tests' iteration counts."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document instead of lines."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write JUnit XML to this file."),
    prometheus: Optional[Path] = typer.Option(None, "--prometheus", help="Also write a node_exporter textfile "
                                              "(NCCL Inspector's metric names, linkscope_check_status)."),
    pass_pct: float = typer.Option(90.0, "--pass-pct", help="PASS at this % of the expectation or more."),
    warn_pct: float = typer.Option(75.0, "--warn-pct", help="WARN at this % or more, else FAIL."),
    nproc: Optional[int] = typer.Option(None, "--nproc", help="Ranks (default: the visible GPUs, 2 on CPU)."),
    oversubscribe: bool = OversubscribeOpt,
    db: Optional[str] = DbOpt,
    fleet: bool = typer.Option(False, "--fleet", help="Every node of a torchrun/srun job at once: each node's items, "
                                                      "node pairs in rounds, the all-reduce over all nodes."),
    since: Optional[str] = typer.Option(None, "--since", help="With --fleet: also judge each node against its own "
                                                              "fleet checks of this window (7d, 12h, 30m)."),
    drop_pct: float = typer.Option(10.0, "--drop-pct", help="With --since: FAIL a node this % below its median."),
    hosts: Optional[str] = typer.Option(None, "--hosts", help="With --fleet: the hostnames that must join "
                                                              "(comma-separated); missing ones are named."),
    rounds: int = typer.Option(3, "--rounds", help="With --fleet: node-pair rounds (each a new partner per node)."),
    timeout: float = typer.Option(300.0, "--timeout", help="With --fleet: give up on a node after S seconds."),
    floors: Optional[Path] = typer.Option(None, "--floors", help="A health-check floors file (the layout of "
                                          "linkscope/hardware/data/health_floors.yaml) to judge against instead of "
                                          "the published floors."),
    from_: Optional[str] = typer.Option(None, "--from", help="Judge a recorded nccl-tests/rccl-tests output (FILE) "
                                                             "or a stored run (RUN_ID) instead of this machine; "
                                                             "needs --expect."),
) -> None:
    """Did I get what I paid for? PASS/WARN/FAIL/SKIP per item; exit 1 when something fails."""
    from linkscope.check.items import Thresholds
    from linkscope.check.run import CheckOptions, run_check

    if quick and full:
        raise UserError("give --quick or --full, not both")
    if nproc is not None and nproc < 1:
        raise UserError(f"--nproc must be at least 1, got {nproc}")
    check_number(timeout, "--timeout", 0, MAX_TIMEOUT_S, low_open=True)
    thresholds = Thresholds(pass_pct, warn_pct).validated()
    from linkscope.check.fleet import check_fleet_numbers

    check_fleet_numbers(drop_pct, rounds)  # refused even where they would not be used
    for path, flag in ((junit, "--junit"), (prometheus, "--prometheus")):
        check_output_path(path, flag)
    if not fleet and (since is not None or hosts is not None):
        raise UserError("--since and --hosts go with --fleet")
    if expect is not None:
        from linkscope.check.run import expected_system

        expected_system(expect)  # unknown --expect: exit 2 before anything is measured
    floors_file = _floors(floors)
    if from_ is not None:
        _from(from_, expect, thresholds, db, as_json, junit, prometheus, fleet or quick or full or nproc is not None,
              floors_file)
        return
    if fleet:
        from linkscope.check.fleet import FleetOptions

        _fleet(FleetOptions(expect=expect, mode="full" if full else "quick", thresholds=thresholds, db_path=db,
                            since=since, drop_pct=drop_pct, rounds=rounds, timeout_s=timeout,
                            hosts=[h.strip() for h in (hosts or "").split(",") if h.strip()]),
               as_json, junit, prometheus)
        return
    result = run_check(CheckOptions(expect=expect, mode="full" if full else "quick", thresholds=thresholds,
                                    db_path=str(db) if db else None, nproc=nproc, oversubscribe=oversubscribe,
                                    floors_file=floors_file))
    _report(result, "this machine", as_json, junit, prometheus, db)


def _floors(path: Optional[Path]) -> Optional[str]:
    """A --floors file, validated before anything is measured (a bad one: one line naming the entry, exit 2)."""
    if path is None:
        return None
    from linkscope.check.sizing import health_floors
    from linkscope.hardware.errors import check_input_file

    check_input_file(path, "a health-check floors file", 1 << 20)
    health_floors(str(path))
    return str(path)


def _from(source: str, expect: Optional[str], thresholds: Any, db: Optional[str], as_json: bool,
          junit: Optional[Path], prometheus: Optional[Path], measures: bool, floors_file: Optional[str]) -> None:
    from linkscope.check.recorded import check_recorded

    if measures:
        raise UserError("--from judges a recorded output: give it without --fleet, --quick, --full or --nproc")
    if expect is None:
        raise UserError("--from needs --expect: the offering or preset the recorded nodes should be")
    result = check_recorded(source, expect, thresholds, str(db) if db else None, floors_file)
    _report(result, escape(source), as_json, junit, prometheus, db)


def _report(result: Any, subject: str, as_json: bool, junit: Optional[Path], prometheus: Optional[Path],
            db: Optional[str]) -> None:
    """A check's outputs, live or from a recorded output alike: the JUnit and Prometheus files (a failed write
    after the run keeps the stored run and says so), JSON or the items and verdict, and exit 1 on FAIL."""
    from linkscope.check.junit import junit_xml

    if junit is not None:
        _after_run(result.run_id, lambda: write_output(junit, junit_xml(result.items), "--junit"))
    if prometheus is not None:
        _after_run(result.run_id, lambda: _write_prometheus(prometheus, result.run_id, db))
    if as_json:
        print_json(result.to_dict())
    else:
        console.print(f"check of {subject} against {escape(result.expected_system)} (run {result.run_id})",
                      highlight=False)
        for item in result.items:
            _print_item(item)
        console.print(f"verdict: {result.verdict}", highlight=False)
    if result.verdict == "FAIL":
        raise typer.Exit(1)


def _print_item(item: Any, indent: str = "") -> None:
    measured = "-" if item.measured is None else item.measured
    expected = "-" if item.expected is None else item.expected
    line = (f"{indent}[{_COLOURS[item.status]}]{item.status:4}[/] {escape(item.name):28} "
            f"measured {escape(str(measured))} / expected {escape(str(expected))} {escape(item.unit)}  "
            f"\\[{escape(item.source)}]")
    console.print(line, highlight=False, soft_wrap=True)
    if item.fix:
        console.print(f"{indent}      {'why' if item.status == 'SKIP' else 'fix'}: {escape(item.fix)}",
                      highlight=False, soft_wrap=True)


def _fleet(opts: Any, as_json: bool, junit: Optional[Path], prometheus: Optional[Path]) -> None:
    from linkscope.check.fleet import run_fleet_check
    from linkscope.check.junit import junit_xml

    result = run_fleet_check(opts)
    if result is None:  # not rank 0: rank 0 reports for the fleet
        return
    items, classes = list(result.items), ["linkscope.check.fleet"] * len(result.items)
    for node in result.nodes:
        node_items = [_check_item(d) for d in node["items"]]
        items += node_items
        classes += [f"linkscope.check.{node['hostname']}"] * len(node_items)
    if junit is not None:
        _after_run(result.run_id, lambda: write_output(junit, junit_xml(items, "linkscope check --fleet", classes),
                                                       "--junit"))
    if prometheus is not None:
        _after_run(result.run_id, lambda: _write_prometheus(prometheus, result.run_id, opts.db_path))
    if as_json:
        print_json(result.to_dict())
    else:
        _print_fleet(result)
    if result.verdict == "FAIL":
        raise typer.Exit(1)


def _check_item(d: dict[str, Any]) -> Any:
    from linkscope.check.items import CheckItem

    return CheckItem(**{k: d[k] for k in ("name", "status", "measured", "expected", "unit", "source", "fix")})


def _print_fleet(result: Any) -> None:
    from linkscope.check.fleet_rules import NO_DOMAIN

    console.print(f"fleet check of {len(result.nodes)} node(s) against {escape(result.expected_system)} "
                  f"(run {result.run_id})", highlight=False)
    by_host = {node["hostname"]: node for node in result.nodes}
    racks = result.racks or [{"nvlink_domain": NO_DOMAIN, "hosts": list(by_host), "verdict": result.verdict}]
    grouped = len(racks) > 1 or any(r["nvlink_domain"] != NO_DOMAIN for r in racks)
    for rack in racks:
        if grouped:
            console.print(f"[{_COLOURS[rack['verdict']]}]{rack['verdict']:4}[/] NVLink domain "
                          f"{escape(rack['nvlink_domain'])}: {len(rack['hosts'])} node(s)", highlight=False)
        for host in rack["hosts"]:
            _print_node(by_host[host], "  " if grouped else "")
    for item in result.items:
        _print_item(item)
    console.print(f"verdict: {result.verdict}", highlight=False)


def _print_node(node: dict[str, Any], indent: str) -> None:
    console.print(f"{indent}[{_COLOURS[node['verdict']]}]{node['verdict']:4}[/] node{node['node']} "
                  f"{escape(node['hostname'])}", highlight=False)
    for item in node["items"]:
        if item["status"] in ("WARN", "FAIL"):
            _print_item(_check_item(item), indent=indent + "      ")


def _after_run(run_id: str, write: Callable[[], None]) -> None:
    """A report file written after the check ran: a failure then (a full disk, a path gone) is a fault, exit 3,
    and says that the verdicts are stored."""
    try:
        write()
    except UserError as exc:
        raise FaultError(f"{exc}; the check is stored as run {run_id}") from None


def _write_prometheus(path: Path, run_id: str, db: Optional[str]) -> None:
    from linkscope.results.prometheus import stored_run_samples, write_textfile
    from linkscope.results.store import ResultStore

    with ResultStore(db) as store:
        info = store.get_run(run_id)
        write_textfile(path, stored_run_samples(info, store.rows(run_id)))


def register(app: typer.Typer) -> None:
    """Add `check` to the app."""
    app.command("check")(check)
