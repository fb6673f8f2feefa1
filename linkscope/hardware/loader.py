"""Load hardware data files (packaged, user config directory, `--catalog FILE`) into one validated database.

Each entry is validated on its own so an error names the file, the entry and the field. References between
entries (an offering's GPU, a system's link generation) are checked after everything is read, and every id
must be unique across all files.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from collections.abc import Iterable

import yaml
from pydantic import BaseModel, ValidationError

from linkscope.hardware import built_cache, parsed_cache
from linkscope.hardware.link_limits import HardwareWarning, bandwidth_problem, generation_problem
from linkscope.hardware.errors import DataError, UserError, read_input_bytes
from linkscope.hardware.offering import Offering
from linkscope.hardware.specs import GpuSpec, LinkSpec
from linkscope.hardware.system import NodeSpec, Origin, ScaleOut, ScaleUp, System

if TYPE_CHECKING:
    from linkscope.hardware.schema import (
        GpuEntry,
        LinkEntry,
        NodeEntry,
        OfferingEntry,
        PriceOverride,
        ScaleOutEntry,
        SystemEntry,
    )

DATA_DIR = Path(__file__).parent / "data"
USER_DIR_ENV = "LINKSCOPE_CONFIG_DIR"

M = TypeVar("M", bound=BaseModel)


@dataclass
class HardwareDB:
    """Everything linkscope knows about hardware: GPUs, link generations, named Systems, offerings."""

    gpus: dict[str, GpuSpec] = field(default_factory=dict)
    links: dict[str, LinkSpec] = field(default_factory=dict)
    systems: dict[str, System] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    _aliases: dict[str, str] = field(default_factory=dict)
    _offerings: dict[str, Offering] | None = field(default=None, repr=False)
    _unread_offering_files: tuple[Path, ...] = field(default=(), repr=False)

    @property
    def offerings(self) -> dict[str, Offering]:
        """The cloud offerings, by id.

        The packaged offering files are most of the data (a command naming one preset needs none of them), so
        when no other file adds or reprices an offering they are read and validated here, on first use."""
        if self._offerings is None:
            files, self._unread_offering_files = self._unread_offering_files, ()
            self._offerings = _packaged_offerings(self, files)
        return self._offerings

    @offerings.setter
    def offerings(self, value: dict[str, Offering]) -> None:
        self._offerings = value

    def gpu(self, name: str) -> GpuSpec | None:
        """Look a GPU up by id or alias, ignoring case, spaces and dashes."""
        key = self._aliases.get(_norm(name))
        return self.gpus.get(key) if key else None

    def gpu_names(self) -> list[str]:
        """All GPU ids, for error messages."""
        return sorted(self.gpus)

    def family_names(self) -> list[str]:
        """Every GPU family (`A100`, `H100`, `MI300X`, ...), for help and error messages."""
        return sorted({g.family_name for g in self.gpus.values()})

    def gpus_matching(self, name: str) -> list[GpuSpec]:
        """What `--gpu NAME` selects: a family name every variant of the family (`A100`: SXM4 and PCIe, 40 and
        80 GB), else an id or alias the one GPU it names; empty when it names neither.

        The family is tried first: `A100` is also an alias of the 40 GB SXM4 board (so that a System file saying
        `gpu: A100` names one GPU), and trying the alias first would silently narrow a filter to that board."""
        key = _norm(name)
        family = [g for g in self.gpus.values() if _norm(g.family_name) == key]
        if family:
            return sorted(family, key=lambda g: g.id)
        spec = self.gpu(name)
        return [spec] if spec is not None else []


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def user_data_files() -> list[Path]:
    """YAML files in the user's config directory ($LINKSCOPE_CONFIG_DIR, else the XDG config dir)."""
    configured = os.environ.get(USER_DIR_ENV)
    if configured:
        base = Path(configured)
    else:
        from platformdirs import user_config_dir

        base = Path(user_config_dir("linkscope"))
    if not base.is_dir():
        return []
    return sorted([*base.glob("*.yaml"), *base.glob("*.yml")])


def packaged_files() -> list[Path]:
    """The data files shipped with linkscope."""
    return [*_packaged_base_files(), *_packaged_offering_files()]


def _packaged_base_files() -> list[Path]:
    return [DATA_DIR / "links.yaml", DATA_DIR / "gpus.yaml", DATA_DIR / "presets.yaml"]


def _packaged_offering_files() -> list[Path]:
    return sorted((DATA_DIR / "offerings").glob("*.yaml"))


# libyaml's C parser is an order of magnitude faster than the pure-Python one; start-up time matters here.
if TYPE_CHECKING:
    _YAML_BASE = yaml.SafeLoader
else:
    _YAML_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeys(_YAML_BASE):
    """The safe loader, refusing a key given twice in one mapping (YAML keeps the last one silently: a hand-edited
    price or bandwidth would vanish without a word)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen and key != "<<"
                seen.add(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if repeated:
                raise yaml.constructor.ConstructorError(None, None, f"key '{key}' given twice in one mapping",
                                                        key_node.start_mark)
        return super().construct_mapping(node, deep)


_YAML_LOADER = _UniqueKeys


def parse_yaml(text: str) -> Any:
    """yaml.safe_load with the C parser when PyYAML was built with it, kept in the parsed-file cache."""
    cached = parsed_cache.lookup(text)
    if not parsed_cache.is_miss(cached):
        return cached
    value = yaml.load(text, Loader=_YAML_LOADER)  # a safe loader either way
    parsed_cache.store(text, value)
    return value


MAX_DATA_FILE_BYTES = 64 * 2**20
"""Far above any catalog or profile (the shipped catalog is well under 1 MiB); a FIFO, /dev/zero or an endless file
is refused rather than read until memory runs out."""


def read_data_text(path: Path) -> str:
    """A data file's text; an unreadable, binary (not UTF-8), oversize or non-regular file (FIFO, device) is a
    DataError naming it."""
    try:
        data = read_input_bytes(path, "a data file", MAX_DATA_FILE_BYTES)
    except UserError as exc:
        raise DataError(str(path), str(exc).removeprefix(f"{path}: ")) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(str(path), "not a text file (not valid UTF-8)") from None


def read_yaml(path: Path) -> Any:
    """Parse one YAML file; a missing or malformed file is a DataError naming it."""
    return parse_yaml_text(read_data_text(path), str(path))


def parse_yaml_text(text: str, file: str) -> Any:
    """Parse YAML text read from `file`; any parse failure (syntax, bad date, nesting too deep) is a DataError."""
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())  # one line, whatever PyYAML says
        raise DataError(file, f"not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise DataError(file, "not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:
        # The constructor raises these for values that parse but cannot be built, e.g. `as_of: 2026-13-45`.
        raise DataError(file, f"not valid YAML: {exc}") from None


def _entry_label(raw: Any, index: int) -> str:
    if isinstance(raw, dict):
        for key in ("id", "instance"):
            if isinstance(raw.get(key), str):
                return raw[key]
    return f"#{index + 1}"


def _validate(model: type[M], raw: Any, file: str, label: str) -> M:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        got = f" (got {err['input']!r})" if err["type"] not in ("missing", "extra_forbidden") and "input" in err else ""
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        raise DataError(file, f"{msg}{got}", entry=label, field=loc or None) from None


def _entries(doc: dict[str, Any], section: str, file: str) -> list[tuple[str, Any]]:
    raw = doc.get(section, [])
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise DataError(file, f"section '{section}' must be a list of entries", field=section)
    return [(_entry_label(item, i), item) for i, item in enumerate(raw)]


@dataclass
class _Pending:
    gpus: list[tuple[str, GpuEntry]] = field(default_factory=list)
    links: list[tuple[str, LinkEntry]] = field(default_factory=list)
    systems: list[tuple[str, SystemEntry]] = field(default_factory=list)
    offerings: list[tuple[str, str, OfferingEntry]] = field(default_factory=list)
    price_overrides: list[tuple[str, PriceOverride]] = field(default_factory=list)


_SECTIONS = frozenset({"provider", "gpus", "links", "systems", "offerings", "price_overrides"})
_OFFERING_SECTIONS = frozenset({"provider", "offerings"})
"""What a packaged offering file may hold: it is read only when offerings are needed, so it cannot add GPUs,
links or Systems, nor reprice another file's offering."""


def _read_file(path: Path, pending: _Pending, sections: frozenset[str] = _SECTIONS) -> None:
    file = str(path)
    doc = read_yaml(path)
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise DataError(file, "expected a mapping with sections gpus, links, systems, offerings")
    unknown = sorted(set(doc) - sections)
    if unknown:
        raise DataError(file, f"unknown section '{unknown[0]}' (expected one of {', '.join(sorted(sections))})")
    # The schemas load only when a file is validated: with the shipped database kept (built_cache), most
    # commands never validate one, and defining the schemas costs a short command a few percent of its time.
    from linkscope.hardware.schema import GpuEntry, LinkEntry, OfferingEntry, PriceOverride, SystemEntry

    provider = doc.get("provider")
    for label, raw in _entries(doc, "links", file):
        pending.links.append((file, _validate(LinkEntry, raw, file, label)))
    for label, raw in _entries(doc, "gpus", file):
        pending.gpus.append((file, _validate(GpuEntry, raw, file, label)))
    for label, raw in _entries(doc, "systems", file):
        pending.systems.append((file, _validate(SystemEntry, raw, file, label)))
    for label, raw in _entries(doc, "offerings", file):
        entry = _validate(OfferingEntry, raw, file, label)
        entry_provider = entry.provider or provider
        if not entry_provider:
            raise DataError(file, "no provider (set 'provider' on the entry or at the top of the file)",
                            entry=label, field="provider")
        pending.offerings.append((file, entry_provider, entry))
    for label, raw in _entries(doc, "price_overrides", file):
        pending.price_overrides.append((file, _validate(PriceOverride, raw, file, label)))


class ConfigFileWarning(UserWarning):
    """A file in the user's config directory that cannot be read; the shipped data is used without it."""

    user_facing = True


def _read_user_file(path: Path, pending: _Pending) -> None:
    """A broken file in the config directory (an old refresh, a hand edit) must not break every command: it is
    skipped with a warning naming it and how to remove it. Files given with --catalog still fail loudly."""
    mine = _Pending()
    try:
        _read_file(path, mine)
    except DataError as exc:
        warnings.warn(ConfigFileWarning(f"{exc}; ignoring this file (fix it, or delete it: rm '{path}')"),
                      stacklevel=4)  # the caller of load_db
        return
    for name in ("gpus", "links", "systems", "offerings", "price_overrides"):
        getattr(pending, name).extend(getattr(mine, name))


def _check_unique(kind: str, items: Iterable[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for file, ident in items:
        if ident in seen:
            raise DataError(file, f"duplicate {kind} id (first defined in {seen[ident]})", entry=ident, field="id")
        seen[ident] = file


def _gpu_spec(e: GpuEntry) -> GpuSpec:
    return GpuSpec(
        id=e.id, vendor=e.vendor, arch=e.arch, form_factor=e.form_factor, memory_gib=e.derived_memory_gib,
        hbm_gb_per_s=e.hbm_gb_per_s, fp16_dense_tflops=e.fp16_dense_tflops, bf16_dense_tflops=e.bf16_dense_tflops,
        fp8_dense_tflops=e.fp8_dense_tflops, scale_up_link=e.scale_up_link, nvlink_links=e.nvlink_links,
        pcie=e.pcie, compute_capability=e.compute_capability, source=e.source, as_of=e.as_of,
        aliases=tuple(e.aliases), family=e.family or e.id,
    )


def _link_spec(e: LinkEntry) -> LinkSpec:
    return LinkSpec(
        id=e.id, family=e.family, generation=e.generation, unit=e.unit, bw_gb_per_s=e.bw_gb_per_s,
        per_link_gb_per_s=e.per_link_gb_per_s, links_per_gpu=e.links_per_gpu, source=e.source,
        as_of=e.as_of, name=e.name,
    )


def _unknown(kind: str, name: str, known: Iterable[str]) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
    return f"unknown {kind} '{name}'{hint}"


_SCALE_UP_FAMILY = {"nvswitch": "nvlink", "nvlink-mesh": "nvlink", "nvlink-bridge": "nvlink",
                    "xgmi-mesh": "infinity-fabric", "pcie": "pcie"}


class NodeBuilder:
    """Turns a validated node entry into a NodeSpec, resolving GPU and link names against the database."""

    def __init__(self, db: HardwareDB) -> None:
        self.db = db

    def build(self, e: NodeEntry, file: str, label: str) -> NodeSpec:
        gpu = self.db.gpu(e.gpu)
        if gpu is None:
            raise DataError(file, _unknown("GPU", e.gpu, self.db.gpus), entry=label, field="gpu")
        return NodeSpec(
            gpu=gpu, gpus=e.gpus, scale_up=self._scale_up(e, gpu, file, label),
            scale_out=self._scale_out(e.scale_out, file, label),
            host_pcie=self._link_id(e.host_pcie, file, label, "host_pcie") if e.host_pcie else gpu.pcie,
            cpu_vendor=e.cpu_vendor, cpu_sockets=e.cpu_sockets,
        )

    def _link_id(self, link_id: str, file: str, label: str, field_name: str) -> str:
        if link_id not in self.db.links:
            raise DataError(file, _unknown("link generation", link_id, self.db.links), entry=label, field=field_name)
        return link_id

    def _scale_up(self, e: NodeEntry, gpu: GpuSpec, file: str, label: str) -> ScaleUp:
        su = e.scale_up
        default_gen = gpu.pcie if su.kind == "pcie" else gpu.scale_up_link
        generation = su.generation or default_gen
        if generation is None:
            raise DataError(file, f"{gpu.id} has no scale-up link; use kind 'pcie' or name the generation",
                            entry=label, field="scale_up.generation")
        link = self.db.links[self._link_id(generation, file, label, "scale_up.generation")]
        expected = _SCALE_UP_FAMILY[su.kind]
        if link.family != expected:
            raise DataError(file, f"scale-up kind '{su.kind}' needs a {expected} link generation, not '{generation}' "
                                  f"({link.family})", entry=label, field="scale_up.generation")
        bw = su.bw_gb_per_s or link.bw_gb_per_s
        if bw is None:
            raise DataError(file, f"link '{generation}' has no default rate; give bw_gb_per_s",
                            entry=label, field="scale_up.bw_gb_per_s")
        impossible = bandwidth_problem(gpu, link, bw)
        if impossible:
            raise DataError(file, impossible, entry=label, field="scale_up.bw_gb_per_s")
        foreign = generation_problem(gpu, link)
        if foreign:
            warnings.warn(HardwareWarning(f"{file}: {label}: scale_up.generation: {foreign}"), stacklevel=2)
        domain = su.domain_size or (2 if su.kind == "nvlink-bridge" else e.gpus)
        if su.in_network_reduction == "nvls" and su.kind != "nvswitch":
            raise DataError(file, "NVLS in-network reduction needs kind 'nvswitch'",
                            entry=label, field="scale_up.in_network_reduction")
        return ScaleUp(kind=su.kind, generation=generation, bw_gb_per_s=bw, domain_size=domain,
                       in_network_reduction=su.in_network_reduction,
                       # NVLink counts are the GPU's (SKUs differ); an Infinity Fabric generation fixes its own.
                       links_per_gpu=gpu.nvlink_links if link.family == "nvlink" else link.links_per_gpu)

    def _scale_out(self, so: ScaleOutEntry, file: str, label: str) -> ScaleOut:
        rate = so.nic_gbit_per_s
        if so.generation:
            link = self.db.links[self._link_id(so.generation, file, label, "scale_out.generation")]
            if rate is None and link.gbit_per_s is not None:
                rate = link.gbit_per_s
        return ScaleOut(fabric=so.fabric, nics=so.nics, nic_gbit_per_s=rate, gpudirect_rdma=so.gpudirect_rdma,
                        sharp=so.sharp, oversubscription=so.oversubscription, generation=so.generation,
                        transport=so.transport)


def _system(e: SystemEntry, node: NodeSpec, origin: Origin) -> System:
    return System(id=e.id, node=node, nodes=e.nodes, name=e.name or e.id, description=e.description,
                  origin=origin, source=e.source, as_of=e.as_of)


def _offering(provider: str, e: OfferingEntry, node: NodeSpec) -> Offering:
    oid = f"{provider}/{e.instance}"
    max_nodes = e.max_nodes or (1 if e.multi_node is False else None)
    system = System(id=oid, node=node, nodes=1, name=e.name or oid, description=e.notes, origin="offering",
                    source=e.source, as_of=e.as_of, max_nodes=max_nodes)
    return Offering(id=oid, provider=provider, instance=e.instance, system=system,
                    price_per_hour=e.price_per_hour, spot_price_per_hour=e.spot_price_per_hour,
                    price_as_of=e.price_as_of, price_source=e.price_source, regions=tuple(e.regions),
                    multi_node=e.multi_node, unconfirmed=tuple(e.unconfirmed), notes=e.notes,
                    source=e.source, as_of=e.as_of, skypilot=e.skypilot,
                    skypilot_aliases=tuple(e.skypilot_aliases), skypilot_parts=tuple(e.skypilot_parts),
                    price_source_kind=e.price_source_kind, currency=e.currency,
                    price_date_basis=e.price_date_basis, price_source_file=e.price_source_file,
                    price_source_commit=e.price_source_commit,
                    books_whole_domain=e.books_whole_domain)


def _apply_override(o: Offering, p: PriceOverride) -> Offering:
    """The offering with the override's price; an override for an unknown offering is ignored by the caller."""
    unconfirmed = tuple(u for u in o.unconfirmed if u not in ("price_per_hour", "price_as_of"))
    return replace(o, price_per_hour=p.price_per_hour, spot_price_per_hour=p.spot_price_per_hour,
                   price_as_of=p.price_as_of, price_source=p.price_source,
                   price_source_kind=p.price_source_kind, currency=p.currency,
                   regions=tuple(p.regions) or o.regions, unconfirmed=unconfirmed,
                   price_date_basis=p.price_date_basis, price_source_file=p.price_source_file,
                   price_source_commit=p.price_source_commit)


_BUILD_CODE = tuple(Path(__file__).with_name(f"{m}.py") for m in ("loader", "schema", "specs", "system", "offering",
                                                                  "errors"))
"""The source files whose code decides what the shipped files validate to."""


def load_db(extra_files: Iterable[Path | str] = (), include_user: bool = True) -> HardwareDB:
    """Read packaged data, the user's config directory and `extra_files` into one validated HardwareDB."""
    user = user_data_files() if include_user else []
    extra = [Path(p) for p in extra_files]
    if user or extra:
        return _read_db(user, extra)
    # The shipped files alone validate to the same database every time: it is kept between starts. It holds the
    # offering files' paths, read on first use, not their contents: those count by their stamps alone.
    stamped = [*_BUILD_CODE, *_packaged_offering_files()]
    return built_cache.cached("hardware", _packaged_base_files(), stamped, lambda: _read_db([], []))


def _read_db(user: list[Path], extra: list[Path]) -> HardwareDB:
    offering_files = _packaged_offering_files()
    others = [*user, *extra]
    paths = [*_packaged_base_files(), *offering_files, *others]
    pending = _Pending()
    for path in _packaged_base_files():
        _read_file(path, pending)
    for path in others:
        if path in user:
            _read_user_file(path, pending)
        else:
            _read_file(path, pending)
    # Another file's offering must be checked against the packaged ids, and its price override applied: then the
    # packaged offerings are read now, in the same order (and with the same messages) as if nothing were deferred.
    eager = bool(pending.offerings or pending.price_overrides)
    if eager:
        packaged = _Pending()
        for path in offering_files:
            _read_file(path, packaged, _OFFERING_SECTIONS)
        pending.offerings[:0] = packaged.offerings
    _check_unique("link", ((f, e.id) for f, e in pending.links))
    _check_unique("GPU", ((f, e.id) for f, e in pending.gpus))
    _check_unique("system", ((f, e.id) for f, e in pending.systems))
    if eager:
        _check_unique("offering", ((f, f"{p}/{e.instance}") for f, p, e in pending.offerings))
    db = HardwareDB(files=paths)
    db.links = {e.id: _link_spec(e) for _, e in pending.links}
    _add_gpus(db, pending.gpus)
    builder = NodeBuilder(db)
    for file, e in pending.systems:
        db.systems[e.id] = _system(e, builder.build(e, file, e.id), "preset" if _packaged(file) else "file")
    if eager:
        db.offerings = _built_offerings(db, pending)
        _apply_overrides(db, pending.price_overrides, {str(p) for p in user})
    else:
        db._unread_offering_files = tuple(offering_files)
    return db


def _packaged_offerings(db: HardwareDB, files: Iterable[Path]) -> dict[str, Offering]:
    """The offerings of the packaged offering files, validated and built against `db`'s GPUs and links."""
    pending = _Pending()
    for path in files:
        _read_file(path, pending, _OFFERING_SECTIONS)
    _check_unique("offering", ((f, f"{p}/{e.instance}") for f, p, e in pending.offerings))
    return _built_offerings(db, pending)


def _built_offerings(db: HardwareDB, pending: _Pending) -> dict[str, Offering]:
    builder = NodeBuilder(db)
    offerings = {}
    for file, provider, o in pending.offerings:
        offering = _offering(provider, o, builder.build(o, file, f"{provider}/{o.instance}"))
        offerings[offering.id] = offering
    return offerings


def _apply_overrides(db: HardwareDB, overrides: list[tuple[str, PriceOverride]], user_files: set[str]) -> None:
    """Overrides apply in file order, so a later file (or `--catalog FILE`) wins. One naming no offering is a
    mistake to report, never a price silently dropped: in a `--catalog` file it fails like any bad entry; in the
    config directory (a refresh from before an offering was renamed) it is skipped with a warning, so one stale
    price cannot break every command."""
    seen: set[tuple[str, str]] = set()
    for file, p in overrides:
        if (file, p.offering) in seen:
            twice = f"price_overrides: {p.offering} is listed twice; the later entry is used"
            if file not in user_files:
                raise DataError(file, f"{p.offering} is listed twice", entry=p.offering, field="offering")
            warnings.warn(ConfigFileWarning(f"{file}: {twice} (fix it, or delete the file: rm '{file}')"),
                          stacklevel=4)
        seen.add((file, p.offering))
        if p.offering in db.offerings:
            db.offerings[p.offering] = _apply_override(db.offerings[p.offering], p)
            continue
        close = difflib.get_close_matches(p.offering, list(db.offerings), n=3, cutoff=0.6)
        problem = f"no offering '{p.offering}'" + (f"; did you mean {', '.join(close)}?" if close else "")
        if file not in user_files:
            raise DataError(file, problem, entry=p.offering, field="offering")
        warnings.warn(ConfigFileWarning(f"{file}: price_overrides: {problem}; this price is ignored (fix it, or "
                                        f"delete the file: rm '{file}')"), stacklevel=4)  # the caller of load_db


@functools.lru_cache(maxsize=64)
def _packaged(file: str) -> bool:
    # Cached: every preset of a file asks, and resolving a path walks it one lstat per component.
    return Path(file).resolve().is_relative_to(DATA_DIR.resolve())


def _add_gpus(db: HardwareDB, entries: list[tuple[str, GpuEntry]]) -> None:
    for file, e in entries:
        for link_field in ("scale_up_link", "pcie"):
            link_id = getattr(e, link_field)
            if link_id is not None and link_id not in db.links:
                raise DataError(file, _unknown("link generation", link_id, db.links), entry=e.id, field=link_field)
        spec = _gpu_spec(e)
        db.gpus[e.id] = spec
        for name in (e.id, *e.aliases):
            key = _norm(name)
            if key in db._aliases and db._aliases[key] != e.id:
                raise DataError(file, f"alias '{name}' already names GPU {db._aliases[key]}", entry=e.id,
                                field="aliases")
            db._aliases[key] = e.id


def _id_from_stem(stem: str) -> str:
    """A valid System id from a file name: `my rack.yaml` -> `my-rack` (ids allow letters, digits, . _ -)."""
    ident = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-._")
    return ident or "system"


def load_system_file(path: Path, db: HardwareDB) -> System:
    """A user's own System written as YAML: one System mapping, or a file whose `systems` list has exactly one."""
    file = str(path)
    doc = read_yaml(path)
    if isinstance(doc, dict) and "systems" in doc:
        entries = _entries(doc, "systems", file)
        if len(entries) != 1:
            raise DataError(file, f"expected exactly one system, found {len(entries)}", field="systems")
        label, raw = entries[0]
    elif isinstance(doc, dict):
        raw = {"id": _id_from_stem(path.stem), **doc}
        label = _entry_label(raw, 0)
    else:
        raise DataError(file, "expected a System mapping (gpu, gpus, scale_up, scale_out, nodes, source, as_of)")
    from linkscope.hardware.schema import SystemEntry  # see _read_file

    entry = _validate(SystemEntry, raw, file, label)
    return _system(entry, NodeBuilder(db).build(entry, file, entry.id), "file")
