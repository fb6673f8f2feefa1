"""Import nccl-tests output (text in any of its layouts, or the `-J` JSON file) as a stored run.

    run_id = import_nccl_tests(Path("all_reduce.log"), store, label="dgx-a")

The parsers never raise on odd content: what can be read is read and the rest is listed in `problems`.
Importing a file with no readable row at all is a UserError.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from linkscope.hardware.errors import UserError, read_input_bytes
from linkscope.results.nccltests.json_format import parse_nccl_tests_json
from linkscope.results.nccltests.model import NcclTestsSection, ParsedNcclTests, Problem
from linkscope.results.nccltests.text_format import library_version, parse_nccl_tests_text
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore

__all__ = ["ImportResult", "ParsedNcclTests", "Problem", "import_nccl_tests", "import_nccl_tests_file",
           "parse_nccl_tests_file", "parse_nccl_tests_json", "parse_nccl_tests_text"]

MAX_FILE_BYTES = 256 * 1024 * 1024
MAX_STORED_INT = 2**63 - 1
"""SQLite's (and PostgreSQL's bigint) largest integer."""
"""Larger files are refused: nccl-tests output is kilobytes, a multi-hundred-megabyte file is something else."""


@dataclass
class ImportResult:
    """What an import stored: the new run's id and everything the parser read (rows, sections, problems)."""

    run_id: str
    parsed: ParsedNcclTests
    already_imported: bool = False
    """The same file content was imported before, as `run_id`; nothing new was stored."""


def parse_nccl_tests_file(path: Path) -> ParsedNcclTests:
    """Read a file as nccl-tests JSON when it is JSON, else as nccl-tests text."""
    text = _read(path)
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if path.suffix.lower() == ".json":
                raise UserError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
        except RecursionError:
            # nccl-tests writes a few levels of nesting; thousands is a hostile or corrupt file.
            raise UserError(f"{path}: JSON nested too deeply to be nccl-tests output") from None
        else:
            try:
                return parse_nccl_tests_json(data, str(path))
            except RecursionError:
                raise UserError(f"{path}: JSON nested too deeply to be nccl-tests output") from None
    return parse_nccl_tests_text(text, str(path))


def import_nccl_tests(path: Path, store: ResultStore, label: str) -> str:
    """Parse an nccl-tests output file and store it as a run of kind 'import'; returns the run id."""
    return import_nccl_tests_file(path, store, label).run_id


def import_nccl_tests_file(path: Path, store: ResultStore, label: str) -> ImportResult:
    """Like `import_nccl_tests`, also returning what was parsed (for counts and warnings).

    A file already imported (same content) is not stored twice: the result names the earlier run and has
    `already_imported` set. Everything is validated before the run is created, so a refused file leaves
    nothing behind."""
    parsed = parse_nccl_tests_file(path)  # reads the file, with one-line errors for missing/unreadable ones
    digest = hashlib.sha256(read_input_bytes(path, "nccl-tests output", MAX_FILE_BYTES)).hexdigest()
    _check_integers(path, parsed.rows)
    invalid = [p for p in parsed.problems if p.invalid]
    if invalid:
        more = f" (and {len(invalid) - 1} more)" if len(invalid) > 1 else ""
        raise UserError(f"{path}: {invalid[0]}{more}; nothing imported")
    if not parsed.rows:
        if parsed.failures:
            raise UserError(f"{path}: the test failed before printing any result ({parsed.failures[0]}); "
                            "nothing imported")
        detail = "; ".join(str(p) for p in parsed.problems[:3])
        raise UserError(f"{path}: no nccl-tests result rows found" + (f" ({detail})" if detail else ""))
    check_one_run_per_op(path, parsed)
    earlier = store.find_import(digest)
    if earlier is not None:
        return ImportResult(run_id=earlier, parsed=parsed, already_imported=True)
    info = run_info(parsed, label)
    info.source_sha256 = digest
    run_id, created = store.create_import_run(info)  # one transaction: a concurrent import of it stores nothing
    if not created:
        return ImportResult(run_id=run_id, parsed=parsed, already_imported=True)
    try:
        store.add_rows(run_id, parsed.rows)
    except BaseException as exc:
        # Never leave a run `running` with no rows behind a failed insert.
        store.finish_run(run_id, "failed", f"import failed: {type(exc).__name__}: {exc}")
        raise
    if parsed.failures:
        # The test died midway: what it printed before is kept, and the run says how it ended.
        store.finish_run(run_id, "failed", f"line {parsed.failures[0].line}: {parsed.failures[0].message}")
    else:
        store.finish_run(run_id, "incomplete" if parsed.problems else "complete")
    return ImportResult(run_id=run_id, parsed=parsed)


def check_one_run_per_op(path: Path, parsed: ParsedNcclTests) -> None:
    """Sections of one op at one rank count are one run each: several in one file (a loop's output with the
    headers grepped away) cannot be told apart, so the file is refused with the lines where each starts."""
    starts: dict[tuple[str, int], list[int]] = {}
    for section in parsed.sections:
        if section.rows:
            starts.setdefault((section.op, section.world_size), []).append(section.first_line or 0)
    for (op, world), lines in starts.items():
        if len(lines) > 1:
            ranks = f"{world} ranks" if world else "an unknown rank count"
            raise UserError(f"{path}: {len(lines)} runs of {op} on {ranks} in one file (starting at lines "
                            f"{', '.join(map(str, lines))}); split it into one file per run; nothing imported")


def run_info(parsed: ParsedNcclTests, label: str) -> RunInfo:
    """The run metadata for an import: hosts and world size from the device lists, versions from the headers."""
    tests = "rccl-tests" if parsed.library == "rccl" else "nccl-tests"
    tests_version = parsed.tests_version or parsed.extra.get("rccl_tests_version")
    versions = {k: v for k, v in ((tests, tests_version), (parsed.library, library_version(parsed))) if v}
    first = parsed.sections[0] if parsed.sections else NcclTestsSection()
    return RunInfo(kind="import", label=label, backend=tests, hosts=parsed.hosts,
                   world_size=parsed.world_size, nodes=max(1, len(parsed.hosts)), versions=versions,
                   config=dict(first.config), command=parsed.command,
                   groups={"ranks": [asdict(d) for d in first.devices]},
                   extra={"source": parsed.source_name, "source_format": parsed.format,
                          "sections": [_section_summary(s) for s in parsed.sections],
                          "problems": [str(p) for p in parsed.problems],
                          "failures": [str(p) for p in parsed.failures], **_source_times(parsed)})


def _section_summary(section: NcclTestsSection) -> dict[str, Any]:
    return {"op": section.op, "binary": section.binary, "layout": section.layout, "first_line": section.first_line,
            "world_size": section.world_size, "hosts": section.hosts, "config": section.config,
            "rows": len(section.rows), "avg_busbw": section.avg_busbw, "out_of_bounds": section.out_of_bounds,
            "out_of_bounds_ok": section.out_of_bounds_ok, "concluded": section.concluded,
            "nccl_tests_version": section.tests_version, "nccl_library_code": section.nccl_library}


def _source_times(parsed: ParsedNcclTests) -> dict[str, Any]:
    """The run's own start and end times, when the file has them (JSON; local time, as nccl-tests wrote them)."""
    return {f"source_{k}": parsed.extra[k] for k in ("start_time", "end_time") if k in parsed.extra}


def _read(path: Path) -> str:
    return read_input_bytes(path, "nccl-tests output", MAX_FILE_BYTES).decode("utf-8", errors="replace")


def _check_integers(path: Path, rows: list[Any]) -> None:
    """Every whole number fits the store's 64-bit integers (a 10^23 `#wrong` is not a count of anything)."""
    for row in rows:
        for name, column in (("size_bytes", "size"), ("count", "count"), ("root", "root"), ("nwrong", "#wrong")):
            value = getattr(row, name, None)
            if isinstance(value, int) and abs(value) > MAX_STORED_INT:
                raise UserError(f"{path}: {column} {str(value)[:30]} is out of range (at most {MAX_STORED_INT}); "
                                "nothing imported")
