"""Read nccl-tests text output: one file may hold several runs (a script running binaries in a row), NCCL log
lines, shell prompts and launcher prefixes in between. What can be read is read; rows that look like data but
do not parse are reported with their line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from linkscope.results.busbw import ROOTED_OPS
from linkscope.results.records import CollectiveRow
from linkscope.results.nccltests.columns import Columns, RowError, columns_for_row, columns_from_header, parse_row
from linkscope.results.nccltests.validate import KNOWN_DTYPES, invalid_reason
from linkscope.results.nccltests.model import (Device, NcclTestsSection, ParsedNcclTests, Problem,
                                               nccl_version_from_code, op_from_binary)

_LAUNCHER_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\[\d+\] |\d+: |[\w.-]+: (?=#|\s*\d+\s+\d+\s))")
"""Open MPI's `[1,0]<stdout>:`, srun's `--label` `0: `, pdsh's `host: ` in front of a header or table line."""
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(?P<version>\S+)(?:\s+\([^)]*\))?"
                      r"\s+nccl-headers=(?P<headers>\d+)\s+nccl-library=(?P<library>\d+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(?P<binary>\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(?P<binary>\S+)")
_CONFIG = re.compile(r"^#?\s*nThread\s+(?P<nthreads>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min>\d+)"
                     r"\s+maxBytes\s+(?P<max>\d+)\s+step:\s*(?P<step>\d+)\((?P<kind>factor|bytes)\)(?P<rest>.*)$")
_CONFIG_PAIR = re.compile(r"([A-Za-z_][A-Za-z_ ]*?):\s*(-?\d+)")
_DEVICE = re.compile(r"^#?\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?(?:Pid\s+(?P<pid>\d+)\s+)?"
                     r"on\s+(?P<host>\S+)\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$")
_OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s+(?P<verdict>OK|FAILED)")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<value>\S+)")
_NCCL_VERSION = re.compile(r"\bNCCL version (?P<version>\d+\.\d+\.\d+\S*)")
_BINARY_WORD = re.compile(r"\b[a-z_]+_perf\w*\b")
_DATA = re.compile(r"^\s*-?\d+\s+-?\d+\s+[A-Za-z]\w*(\s|$)")
"""A table row; a sign is accepted so that a negative size is refused by name instead of skipped unseen."""
_PROMPT = re.compile(r"^(?:\S*[$#>]\s+)+")
"""A shell prompt (`user@host:~/dir$ `, `root@host# `, `> `) in front of a pasted command."""
_FAILURE = re.compile(r"\b(?:Test\s+)?(?:NCCL|CUDA|HIP|RCCL)\s+failure\b|\bTest failure\b")
"""nccl-tests' `Test NCCL failure common.cu:1204 '...'` and `.. host pid 757466: Test failure common.cu:915`."""
_RCCL_VERSION = re.compile(r"^RCCL version\s*:\s*(?P<version>\S+)")
_RCCL_TESTS_VERSION = re.compile(r"^rccl-tests:\s*Version\s+(?P<version>\S+)")
_NUMBERS_ONLY = re.compile(r"^\s*(?:-?[\d.]+(?:e[+-]?\d+)?|N/A)(?:\s+(?:-?[\d.]+(?:e[+-]?\d+)?|N/A))*\s*$")
"""The rest of a table row that an NCCL line interrupted: only numbers (and N/A)."""
_TYPES = "|".join(sorted(KNOWN_DTYPES, key=len, reverse=True))
_SPLIT_ROW = re.compile(rf"^(?P<head>\s*\d+\s+\d+\s+(?:{_TYPES})(?:\s+(?:sum|prod|max|min|avg|none|mulsum))?"
                        r"(?:\s+-?\d+)?)\s*(?P<tail>\S*:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN).*)$")
"""A row's leading fields with an NCCL line printed right after them, before the timings."""


def parse_nccl_tests_text(text: str, source_name: str) -> ParsedNcclTests:
    """Read nccl-tests text output (any layout, several runs in a row) into sections of CollectiveRows."""
    reader = _Reader(source_name)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        reader.feed(number, _LAUNCHER_PREFIX.sub("", line))
    return reader.finish()


class _Reader:
    """Line-by-line state: the section being filled and the table columns in force."""

    def __init__(self, source_name: str) -> None:
        self.parsed = ParsedNcclTests(source_name=source_name, format="text")
        self.section: NcclTestsSection | None = None
        self.columns: Columns | None = None
        self.pending: tuple[int, str] | None = None
        """(line, leading fields) of a row an NCCL line interrupted, waiting for its timings."""
        self._comment_handlers: list[tuple[re.Pattern[str], Callable[[re.Match[str], int], None]]] = [
            (_VERSION, self._on_version), (_STARTING, self._on_starting), (_CONCLUDED, self._on_concluded),
            (_CONFIG, self._on_config), (_DEVICE, self._on_device), (_OUT_OF_BOUNDS, self._on_out_of_bounds),
            (_AVG_BUSBW, self._on_avg_busbw),
        ]

    def feed(self, number: int, line: str) -> None:
        """Handle one line (launcher prefix already removed)."""
        stripped = line.strip()
        if self.pending is not None and _NUMBERS_ONLY.match(stripped):
            self._join_split_row(number, stripped)
        elif stripped.startswith("#"):
            self._on_comment(number, stripped)
        elif (split := _SPLIT_ROW.match(line)) is not None:
            self.pending = (number, split["head"].strip())
        elif _DATA.match(line):
            self._on_data(number, stripped)
        elif (config := _CONFIG.match(stripped)) is not None:
            self._on_config(config, number)  # some pastes lose the leading '#'
        elif (device := _DEVICE.match(stripped)) is not None:
            self._on_device(device, number)  # ... and markdown renders '# Rank' lines without it
        elif (columns := columns_from_header(stripped)) is not None:
            self._on_columns(columns, number)
        else:
            self._on_other(number, stripped)

    def _join_split_row(self, number: int, rest: str) -> None:
        """An NCCL line was printed between a row's leading fields and its timings: read the row as one."""
        assert self.pending is not None
        first, head = self.pending
        self.pending = None
        self.parsed.problems.append(Problem(first, f"row split by an NCCL line (lines {first} and {number}); "
                                                   "read as one row"))
        self._on_data(first, f"{head} {rest}")

    def finish(self) -> ParsedNcclTests:
        """Close the last section and return everything read."""
        self._close()
        if self.pending is not None:
            self.parsed.problems.append(Problem(self.pending[0], "row cut short after its leading fields "
                                                                 "(an NCCL line followed, the timings never did)"))
        self.parsed.problems.sort(key=lambda p: p.line or 0)
        return self.parsed

    # --- sections -------------------------------------------------------------------------------------------

    def _open(self, number: int) -> NcclTestsSection:
        self._close()
        self.section = NcclTestsSection(first_line=number)
        return self.section

    def _close(self) -> None:
        section, self.section = self.section, None
        if section is None or not (section.rows or section.devices or section.config):
            return
        _fill_rows(section)
        if section.rows and section.avg_busbw is None:
            self.parsed.problems.append(Problem(section.first_line, f"{section.op} run has no footer "
                                                "(Avg bus bandwidth); the output may have been cut short"))
        self.parsed.sections.append(section)

    def _current(self, number: int, fresh: Callable[[NcclTestsSection], bool] = lambda s: True) -> NcclTestsSection:
        """The open section if it can still take this header line, else a new one."""
        s = self.section
        if s is None or s.rows or s.avg_busbw is not None or s.concluded or not fresh(s):
            return self._open(number)
        return s

    # --- header and footer lines ----------------------------------------------------------------------------

    def _on_comment(self, number: int, line: str) -> None:
        for pattern, handler in self._comment_handlers:
            match = pattern.match(line)
            if match:
                handler(match, number)
                return
        columns = columns_from_header(line)
        if columns is not None:
            self._on_columns(columns, number)

    def _on_version(self, m: re.Match[str], number: int) -> None:
        s = self._current(number, lambda s: not (s.tests_version or s.config or s.devices))
        s.headed = True
        s.tests_version = m["version"]
        s.nccl_headers, s.nccl_library = int(m["headers"]), int(m["library"])

    def _on_starting(self, m: re.Match[str], number: int) -> None:
        s = self._current(number, lambda s: not (s.config or s.devices))
        s.set_binary(m["binary"])
        s.headed = True

    def _on_concluded(self, m: re.Match[str], number: int) -> None:
        if self.section is not None:
            if self.section.op == "unknown":
                self.section.set_binary(m["binary"])
            self.section.concluded = True

    def _on_config(self, m: re.Match[str], number: int) -> None:
        s = self._current(number, lambda s: not (s.config or s.devices))
        s.config = _config(m)
        s.headed = True

    def _on_device(self, m: re.Match[str], number: int) -> None:
        s = self._current(number)
        s.headed = True
        if any(d.rank == int(m["rank"]) and d.host != m["host"] for d in s.devices):
            self.parsed.problems.append(Problem(number, f"rank {m['rank']} is listed twice ({m['host']} and "
                                                        "another host): separate runs that each think they are "
                                                        "alone (nccl-tests built without MPI, started by mpirun?)"))
        s.devices.append(Device(rank=int(m["rank"]), host=m["host"], device=int(m["device"]), name=m["name"],
                                bus_id=m["bus"], group=_opt_int(m["group"]), pid=_opt_int(m["pid"])))

    def _on_columns(self, columns: Columns, number: int) -> None:
        if self.section is None or self.section.rows or self.section.avg_busbw is not None:
            self._open(number)
        self.columns = columns

    def _on_out_of_bounds(self, m: re.Match[str], number: int) -> None:
        if self.section is not None:
            self.section.out_of_bounds = int(m["count"])
            self.section.out_of_bounds_ok = m["verdict"] == "OK"

    def _on_avg_busbw(self, m: re.Match[str], number: int) -> None:
        if self.section is None:
            return
        try:
            self.section.avg_busbw = float(m["value"])
        except ValueError:
            self.parsed.problems.append(Problem(number, f"Avg bus bandwidth '{m['value']}' is not a number"))

    # --- data and everything else ---------------------------------------------------------------------------

    def _on_data(self, number: int, line: str) -> None:
        s = self.section
        if s is None or s.avg_busbw is not None or s.concluded:
            s = self._open(number)
        tokens = line.split()
        size = int(tokens[0]) if tokens[0].lstrip("-").isdigit() and len(tokens[0]) < 20 else None
        if size is not None and s.rows and size < s.rows[-1].size_bytes:
            # Sizes only grow within one run: a smaller one starts another run (several runs in one file, their
            # headers cut away by grep).
            self.parsed.problems.append(Problem(number, f"size {size} after {s.rows[-1].size_bytes}: another run "
                                                        "starts here without a header"))
            s = self._open(number)
        elif size and s.rows and size == s.rows[-1].size_bytes and size in s.sizes_at:
            self.parsed.problems.append(Problem(number, f"size {size} printed again (first at line "
                                                        f"{s.sizes_at[size]})"))
        columns = self.columns or columns_for_row(tokens)
        if columns is None:
            self.parsed.problems.append(Problem(number, f"data row with {len(tokens)} fields matches no "
                                                "nccl-tests layout and no column header precedes it"))
            return
        try:
            rows = parse_row(tokens, columns)
        except RowError as exc:
            self.parsed.problems.append(Problem(number, f"{exc}: {line[:80]}", invalid=_overflows(tokens, columns)))
            return
        reasons = [r for r in map(invalid_reason, rows) if r]
        if reasons:
            self.parsed.problems.append(Problem(number, f"{reasons[0]}: {line.strip()[:80]}", invalid=True))
            return
        s.rows.extend(rows)
        if size is not None:
            s.sizes_at.setdefault(size, number)
        s.layout, s.columns = columns.layout, columns.prefix + columns.half

    def _on_other(self, number: int, line: str) -> None:
        if _FAILURE.search(line) and "NCCL INFO" not in line:
            self.parsed.failures.append(Problem(number, line[:200]))
            return
        rccl, tests = _RCCL_VERSION.match(line), _RCCL_TESTS_VERSION.match(line)
        if rccl is not None or tests is not None:
            self.parsed.library = "rccl"
            if rccl is not None:
                self.parsed.nccl_version = self.parsed.nccl_version or rccl["version"]
            if tests is not None:
                self.parsed.extra.setdefault("rccl_tests_version", tests["version"])
            return
        version = _NCCL_VERSION.search(line)
        if version and self.parsed.nccl_version is None:
            self.parsed.nccl_version = version["version"]
            return
        binary = _single_binary(line)
        if binary is not None:
            if not self.parsed.command:
                self.parsed.command = _PROMPT.sub("", line)
            self._current(number, lambda s: s.binary is None and not s.config).set_binary(binary)


def _config(m: re.Match[str]) -> dict[str, object]:
    """The `# nThread ...` line as config keys (nthreads, ngpus, min_bytes, ..., warmup_iters, iters, ...)."""
    step_key = "step_factor" if m["kind"] == "factor" else "step_bytes"
    config: dict[str, object] = {"nthreads": int(m["nthreads"]), "ngpus": int(m["ngpus"]),
                                 "min_bytes": int(m["min"]), "max_bytes": int(m["max"]), step_key: int(m["step"])}
    for key, value in _CONFIG_PAIR.findall(m["rest"]):
        config[key.strip().lower().replace(" ", "_")] = int(value)
    return config


REDUCTIONS = frozenset({"sum", "prod", "max", "min", "avg"})
ALL_REDUCE_MIN_FACTOR = 1.05
"""busbw / algbw above 1 is all-reduce's alone (2(n-1)/n); the margin keeps rounding of tiny sizes out."""


def _op_from_rows(rows: list[CollectiveRow], root_printed: bool) -> str:
    """The op of a section whose header names none (an MPI launcher's prefixes hid the binary's name): all-reduce
    when every row reduces (to no root, where the root is printed) and the busbw of its sizable rows exceeds the
    algbw, which no other collective's bus factor does; else unknown. Reduce-scatter, all-gather and the rooted ops
    cannot be told apart from the columns alone."""
    sized = [r for r in rows if r.algbw >= 1.0]
    if sized and all(r.redop in REDUCTIONS and (r.root == -1 or not root_printed) for r in rows) and \
            all(r.busbw > ALL_REDUCE_MIN_FACTOR * r.algbw for r in sized):
        return "all_reduce"
    return "unknown"


def _fill_rows(section: NcclTestsSection) -> None:
    """Give every row what is only known once the section is complete: op, world size, iterations, root."""
    root_printed = not section.columns or "root" in section.columns
    if section.op == "unknown":
        section.op = _op_from_rows(section.rows, root_printed)
    iters = section.config.get("iters", 0)
    for row in section.rows:
        row.op = section.op
        row.world_size = section.world_size
        row.iters = iters if isinstance(iters, int) else 0
        if not root_printed:
            # Before 2.13 the root was not printed; rooted collectives used the default root 0.
            row.root = 0 if section.op in ROOTED_OPS else -1


def _overflows(tokens: list[str], columns: Columns) -> bool:
    """A row that failed to parse is still refused outright when its leading integers are absurdly long."""
    return any(t.lstrip("-").isdigit() and len(t.lstrip("-")) > 18 for t in tokens[: len(columns.prefix)])


def _single_binary(line: str) -> str | None:
    """The nccl-tests binary a command line runs, when it names exactly one collective."""
    names = [w for w in _BINARY_WORD.findall(line) if op_from_binary(w) != "unknown"]
    return names[0] if names and len({op_from_binary(n) for n in names}) == 1 else None


def _opt_int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def library_version(parsed: ParsedNcclTests) -> str | None:
    """The NCCL version the run used: as NCCL printed it, else from the library code in the header."""
    if parsed.nccl_version:
        return parsed.nccl_version
    code = next((s.nccl_library for s in parsed.sections if s.nccl_library), None)
    return nccl_version_from_code(code) if code else None
