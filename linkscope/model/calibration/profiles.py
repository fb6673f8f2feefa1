"""Calibrated profiles: what a measured run says a System actually does, saved for `--system profile:NAME`.

A profile keeps the fitted α–β curve of every op measured, the run it came from and, when the run was on
GPUs, the probed System. Collective predictions on a profile use the fitted curves; training and inference
predictions use the System with its link bandwidths replaced by the measured ones.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from linkscope.hardware.errors import UserError
from linkscope.hardware.limits import MAX_GPUS
from linkscope.hardware.loader import HardwareDB, read_data_text
from linkscope.hardware.serialize import system_dict, system_from_dict
from linkscope.hardware.system import System
from linkscope.model.calibration.calibrate import OpFit, Segment
from linkscope.model.comm.predict import CollectivePrediction
from linkscope.model.comm.tiers import CommTiers, comm_tiers
from linkscope.model.ranges.accuracy import time_range
from linkscope.results.busbw import algbw_gb_per_s, bus_factors

PROFILE_DIR_ENV = "LINKSCOPE_PROFILE_DIR"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class Profile:
    """A named calibration."""

    name: str
    run_id: str
    created_at: str
    ranks: int
    nodes: int
    backend: str
    fits: dict[str, OpFit]
    system: dict[str, Any] | None = None
    offering: str | None = None
    label: str = ""
    train: dict[str, Any] | None = None
    """A training calibration (`model.train_fit.TrainFit.as_dict`), from a `bench train` run on CPU ranks."""
    train_compute: dict[str, Any] | None = None
    """A training calibration on GPUs (`model.calibration.train_compute.ComputeScale.as_dict`): the measured
    compute against the datasheet step model's, applied on the profile's System."""
    kv: dict[str, Any] | None = None
    """A KV-transfer calibration (`model.calibration.kv_fit.KvFit.as_dict`), from a `bench kv` run."""

    def fit(self, op: str) -> OpFit:
        """The fitted curve of `op` (UserError naming what was measured when it is missing)."""
        if op not in self.fits:
            raise UserError(f"profile '{self.name}' has no {op} measurement (it has: {', '.join(sorted(self.fits))})")
        return self.fits[op]


def profile_dir() -> Path:
    """Where profiles live: $LINKSCOPE_PROFILE_DIR, else `profiles/` in the user data directory."""
    configured = os.environ.get(PROFILE_DIR_ENV)
    if configured:
        return Path(configured)
    from platformdirs import user_data_dir

    return Path(user_data_dir("linkscope")) / "profiles"


def _fit_to_json(fit: OpFit) -> dict[str, Any]:
    data = asdict(fit)
    data["segments"] = [{**seg, "upper_bytes": None if seg["upper_bytes"] == float("inf") else seg["upper_bytes"]}
                        for seg in data["segments"]]
    return data


def _fit_from_json(data: dict[str, Any]) -> OpFit:
    segments = tuple(Segment(s["alpha_us"], s["busbw_gb_per_s"],
                             float("inf") if s["upper_bytes"] is None else s["upper_bytes"]) for s in data["segments"])
    return OpFit(data["op"], data["ranks"], data["nodes"], segments, data["median_error"], data["max_error"],
                 data["points"])


MAX_ALPHA_US = 1e6
"""A fitted fixed cost per collective above one second is no interconnect's; 1e308 would reach every prediction."""
MAX_BUSBW_GB_PER_S = 1e5
"""100 TB/s per GPU: far above any link made (NVLink 5 is 1.8 TB/s per GPU)."""
MAX_COEFFICIENT = 1e12
"""Any other stored figure (sizes in bytes, errors, train coefficients): above it, sums overflow to infinity."""


def _number(value: Any, where: str, *, positive: bool, high: float = MAX_COEFFICIENT) -> float:
    """A stored coefficient as a finite float (positive, or at least not negative) at most `high`, else UserError
    naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        need = "a finite number > 0" if positive else "a finite number >= 0"
        raise UserError(f"{where} must be {need}, got {value!r}")
    if value > high:
        raise UserError(f"{where} must be at most {high:g}, got {value!r}")
    return float(value)


def _check_fit(fit: OpFit, where: str) -> None:
    if not isinstance(fit.ranks, int) or fit.ranks < 1 or not isinstance(fit.nodes, int) or fit.nodes < 1:
        raise UserError(f"{where}: ranks and nodes must be whole numbers >= 1")
    if not fit.segments:
        raise UserError(f"{where}: no fitted segments")
    previous = 0.0
    for i, seg in enumerate(fit.segments):
        _number(seg.alpha_us, f"{where} segment {i} alpha_us", positive=False, high=MAX_ALPHA_US)
        _number(seg.busbw_gb_per_s, f"{where} segment {i} busbw_gb_per_s", positive=True, high=MAX_BUSBW_GB_PER_S)
        last = i == len(fit.segments) - 1
        # Size ranges follow each other upwards; only the last one is open-ended.
        if last and seg.upper_bytes != math.inf:
            raise UserError(f"{where}: the last segment must be open-ended (upper_bytes null)")
        if not last and not previous < _number(seg.upper_bytes, f"{where} segment {i} upper_bytes", positive=True,
                                               high=float(2**63)):
            raise UserError(f"{where} segment {i} upper_bytes must grow from one segment to the next")
        previous = seg.upper_bytes
    _number(fit.median_error, f"{where} median_error", positive=False)
    _number(fit.max_error, f"{where} max_error", positive=False)


def check_profile(profile: Profile, where: str) -> None:
    """Every figure a prediction would use is finite and in range (UserError naming the profile and the field).

    Run when a profile is written and when it is read, so no prediction ever starts from NaN, infinity, zero
    or a negative coefficient."""
    for key in ("ranks", "nodes"):
        value = getattr(profile, key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
            raise UserError(f"{where}: {key} must be a whole number from 1 to {MAX_GPUS}, got {value!r}")
    # A hand-edited file can hold anything: each part is the type the predictions read, or the profile is refused.
    for key in ("system", "train", "train_compute", "kv"):
        if getattr(profile, key) is not None and not isinstance(getattr(profile, key), dict):
            raise UserError(f"{where}: {key} must be a mapping or null, got {getattr(profile, key)!r:.40}")
    for key in ("name", "run_id", "created_at", "backend", "label"):
        if not isinstance(getattr(profile, key), str):
            raise UserError(f"{where}: {key} must be text, got {getattr(profile, key)!r:.40}")
    if profile.offering is not None and not isinstance(profile.offering, str):
        raise UserError(f"{where}: offering must be text or null, got {profile.offering!r:.40}")
    if not isinstance(profile.fits, dict):
        raise UserError(f"{where}: fits must be a mapping of op to fit")
    for op, fit in profile.fits.items():
        _check_fit(fit, f"{where}: {op}")
    if profile.train is not None:
        coefficients = profile.train.get("coefficients")
        if not isinstance(coefficients, dict) or not coefficients:
            raise UserError(f"{where}: train.coefficients is missing")
        values = [_number(v, f"{where}: train coefficient {k}", positive=False) for k, v in coefficients.items()]
        if not any(values):
            raise UserError(f"{where}: every train coefficient is 0; the profile predicts nothing")
        for key in ("median_error", "max_error"):
            _number(profile.train.get(key), f"{where}: train.{key}", positive=False)
        _number(profile.train.get("points"), f"{where}: train.points", positive=True)
    if profile.train_compute is not None:
        from linkscope.model.calibration.train_compute import ComputeScale

        ComputeScale.from_dict(profile.train_compute, where)
    if profile.kv is not None:
        from linkscope.model.calibration.kv_fit import KvFit

        KvFit.from_dict(profile.kv, where)


def save_profile(profile: Profile) -> Path:
    """Write a profile as JSON; the name must be a plain file name."""
    if not NAME_PATTERN.match(profile.name):
        raise UserError(f"'{profile.name}' is not a valid profile name (letters, digits, . _ -)", field="name")
    check_profile(profile, f"profile '{profile.name}'")
    folder = profile_dir()
    path = folder / f"{profile.name}.json"
    data = {**asdict(profile), "fits": {op: _fit_to_json(f) for op, f in profile.fits.items()}}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write profile {path}: {exc.strerror or exc}") from None
    return path


def load_profile(name: str) -> Profile:
    """Read a saved profile by name."""
    path = profile_dir() / f"{name}.json"
    if not path.exists():  # anything else there (a FIFO, a directory) is refused by name when read
        known = ", ".join(list_profiles()) or "none saved yet; run `linkscope calibrate RUN_ID`"
        raise UserError(f"unknown profile '{name}' (profiles: {known})")
    try:
        data = json.loads(read_data_text(path))
        data["fits"] = {op: _fit_from_json(f) for op, f in data["fits"].items()}
        profile = Profile(**data)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path}: not a valid profile ({exc.__class__.__name__}: {str(exc)[:200]})") from None
    except RecursionError:
        raise UserError(f"{path}: not a valid profile (nested too deeply)") from None
    check_profile(profile, f"profile '{name}' ({path})")
    return profile


class ProfileWarning(UserWarning):
    """A saved profile that cannot be read: it is left out, everything else keeps working."""

    user_facing = True


def usable_profiles() -> list[Profile]:
    """Every saved profile that loads; each one that does not is named in one warning and left out, so one damaged
    file never breaks the commands that look through them all (advise, predict on an offering)."""
    loaded = []
    for name in list_profiles():
        try:
            loaded.append(load_profile(name))
        except UserError as exc:
            warnings.warn(ProfileWarning(f"{exc}; left out (fix it, or delete it)"), stacklevel=2)
    return loaded


def list_profiles() -> list[str]:
    """Names of the saved profiles."""
    folder = profile_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def new_profile(name: str, run_id: str, ranks: int, nodes: int, backend: str, fits: dict[str, OpFit],
                system: System | None, offering: str | None, label: str,
                train: dict[str, Any] | None = None, train_compute: dict[str, Any] | None = None,
                kv: dict[str, Any] | None = None) -> Profile:
    """A profile stamped with the current time."""
    return Profile(name=name, run_id=run_id, created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   ranks=ranks, nodes=nodes, backend=backend, fits=fits,
                   system=system_dict(system) if system else None, offering=offering, label=label, train=train,
                   train_compute=train_compute, kv=kv)


def profile_system(profile: Profile, db: HardwareDB) -> System:
    """The System a GPU profile was measured on, named after the profile."""
    if profile.system is None:
        raise UserError(f"profile '{profile.name}' was measured on {profile.backend} ranks without a GPU System; "
                        "it can predict collectives only (`predict collective --system profile:NAME`)")
    base = system_from_dict(profile.system, db.gpu)
    return replace(base, id=f"profile:{profile.name}", origin="profile")


def calibrated_tiers(profile: Profile, system: System) -> CommTiers:
    """The System's tiers with the measured all-reduce bus bandwidth in place of the NCCL model's."""
    tiers = comm_tiers(system)
    fit = profile.fits.get("all_reduce")
    if fit is None:
        return tiers
    measured = fit.peak_busbw_gb_per_s
    if fit.nodes > 1:
        return replace(tiers, nic_node_gb_per_s=measured)
    if tiers.nvlink_bw_gb_per_s > 0:
        return replace(tiers, nvlink_bw_gb_per_s=measured)
    return replace(tiers, pcie_bw_gb_per_s=measured, inter_socket_bw_gb_per_s=measured)


def profile_for_offering(offering_id: str) -> Profile | None:
    """The newest saved profile calibrated for a catalog offering, if any."""
    matches = [profile for profile in usable_profiles() if profile.offering == offering_id]
    return max(matches, key=lambda p: p.created_at, default=None)


def warn(message: str) -> None:
    """One line on stderr; predictions stay on stdout so they still pipe into other tools."""
    print(message, file=sys.stderr)


def predict_from_profile(profile: Profile, op: str, sizes_bytes: list[int],
                         gpus: int | None = None) -> list[CollectivePrediction]:
    """Predict with a calibrated profile's fitted curve (the rank count it was measured at by default)."""
    fit = profile.fit(op)
    ranks = gpus if gpus is not None else fit.ranks
    if ranks > fit.ranks:
        warn(f"warning: profile '{profile.name}' was measured on {fit.ranks} ranks; extrapolating {op} to {ranks}")
    times = fit.predict_us(sizes_bytes, ranks)
    factor = float(bus_factors(op, ranks))
    out = []
    for nbytes, time_us in zip(sizes_bytes, times):
        algbw = algbw_gb_per_s(nbytes, float(time_us))
        out.append(CollectivePrediction(op=op, bytes=int(nbytes), gpus=ranks, nodes=fit.nodes,
                                        algorithm=f"fit ({profile.backend})", protocol="",
                                        time_us=float(time_us), algbw=algbw, busbw=algbw * factor,
                                        bottleneck=f"run {profile.run_id}",
                                        time_us_range=time_range(float(time_us), "collectives")))
    return out
