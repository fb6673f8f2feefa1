"""`linkscope calibrate RUN_ID`: fit a stored bench (or imported nccl-tests) run and save it as a profile."""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.serialize import system_from_dict
from linkscope.hardware.system import System
from linkscope.model.calibration.calibrate import OpFit, fit_rows
from linkscope.model.calibration.profiles import Profile, new_profile, save_profile
from linkscope.model.calibration.train_compute import fit_compute_scale
from linkscope.model.calibration.train_fit import fit_train, measured_points
from linkscope.results.records import RunInfo
from linkscope.results.store import ResultStore


@dataclass
class CalibrationReport:
    """The saved profile, where it went, and the per-op fit quality."""

    profile: Profile
    path: str

    def fit_errors(self) -> dict[str, tuple[float, float]]:
        """op -> (median, max) relative error of the fit on the measured sizes."""
        return {op: (fit.median_error, fit.max_error) for op, fit in self.profile.fits.items()}


def _system(info_system: dict | None, db: HardwareDB) -> System | None:
    if not info_system:
        return None
    try:
        return system_from_dict(info_system, db.gpu)
    except UserError:
        return None


def calibrate_run(store: ResultStore, run_id: str, name: str | None, offering: str | None,
                  db: HardwareDB) -> CalibrationReport:
    """Fit every op of a stored run and save the profile (named after the run unless `name` is given)."""
    info = store.get_run(run_id)
    if info.kind == "p2p":
        raise UserError(f"run {info.run_id} is a p2p matrix; calibrate a collective sweep (`linkscope bench`)")
    if info.kind == "moe":
        # One shape gives two message sizes (dispatch and combine); latency and bandwidth need a sweep to separate.
        raise UserError(f"run {info.run_id} times one MoE shape, too few sizes to fit latency and bandwidth; "
                        "calibrate an all_to_all sweep (`linkscope bench all_to_all`) and pass it to `bench moe` as "
                        "--system profile:NAME")
    if info.kind == "kv":
        return _calibrate_kv(info, name, offering, db)
    if offering is not None and offering not in db.offerings:
        raise UserError(f"unknown offering '{offering}' (see `linkscope catalog`)", field="offering")
    if offering is not None:
        _check_offering_matches(info, offering, db)
    if info.kind == "train":
        return _calibrate_train(info, name, offering, db)
    ranks = info.world_size or 2
    fits: dict[str, OpFit] = fit_rows(store.rows(info.run_id), ranks, info.nodes or 1)
    profile = new_profile(name or f"run-{info.run_id}", info.run_id, ranks, info.nodes or 1, info.backend, fits,
                          _system(info.system, db), offering, info.label)
    return CalibrationReport(profile=profile, path=str(save_profile(profile)))


GPU_BACKENDS = ("nccl", "nccl-tests", "rccl-tests")
"""Runs measured on GPUs: linkscope's own on NCCL, and imported nccl-tests output."""


def _check_offering_matches(info: RunInfo, offering: str, db: HardwareDB) -> None:
    """A profile stands in for an offering only when measured on that offering's kind of GPU."""
    if info.backend not in GPU_BACKENDS:
        raise UserError(f"run {info.run_id} was measured on {info.backend} (CPU) ranks; its figures cannot stand in "
                        f"for the GPU offering {offering} (calibrate a run measured on that offering's GPUs)",
                        field="offering")
    system = _system(info.system, db)
    wanted = db.offerings[offering].system.node.gpu.id
    if system is not None and system.node.gpu.id != wanted:
        raise UserError(f"run {info.run_id} was measured on {system.node.gpu.id}, but {offering} has {wanted}",
                        field="offering")


def _gpu_system(info: RunInfo, db: HardwareDB) -> System | None:
    """The probed GPU System of a run on GPU ranks; None for CPU ranks (or a run whose probe saw no GPU)."""
    system = _system(info.system, db) if info.backend == "nccl" else None
    return system if system is not None and system.node.gpu.id != "CPU" else None


def _calibrate_train(info: RunInfo, name: str | None, offering: str | None, db: HardwareDB) -> CalibrationReport:
    """GPU ranks: the measured compute against the datasheet model's; CPU ranks: the fitted step model."""
    points = (info.extra.get("train") or {}).get("points") or []
    gpu_system = _gpu_system(info, db)
    if gpu_system is not None:
        docs = (info.extra.get("train_summary") or {}).get("points") or []
        scale = fit_compute_scale(points, docs, gpu_system)
        profile = new_profile(name or f"run-{info.run_id}", info.run_id, info.world_size or 1, info.nodes or 1,
                              info.backend, {}, gpu_system, offering, info.label, train_compute=scale.as_dict())
        return CalibrationReport(profile=profile, path=str(save_profile(profile)))
    shapes, times = measured_points(points)
    if not shapes:
        raise UserError(f"run {info.run_id} has no timed training steps to calibrate from")
    fit = fit_train(shapes, times)
    profile = new_profile(name or f"run-{info.run_id}", info.run_id, info.world_size or 1, info.nodes or 1,
                          info.backend, {}, _system(info.system, db), offering, info.label, train=fit.as_dict())
    return CalibrationReport(profile=profile, path=str(save_profile(profile)))


def _calibrate_kv(info: RunInfo, name: str | None, offering: str | None, db: HardwareDB) -> CalibrationReport:
    """A `bench kv` run: the link's latency, per-page cost and bandwidth fitted on its points (median time each)."""
    import statistics

    from linkscope.model.calibration.kv_fit import fit_kv

    if offering is not None:
        raise UserError("--offering: a KV-transfer fit describes the ranks it ran on, not an offering's GPUs",
                        field="offering")
    points = [p for p in (info.extra.get("kv") or {}).get("points") or [] if p.get("seconds")]
    fit = fit_kv([p["messages_per_pair"] for p in points], [p["bytes_per_pair"] for p in points],
                 [statistics.median(p["seconds"]) for p in points])
    profile = new_profile(name or f"run-{info.run_id}", info.run_id, info.world_size or 2, info.nodes or 1,
                          info.backend, {}, _system(info.system, db), None, info.label, kv=fit.as_dict())
    return CalibrationReport(profile=profile, path=str(save_profile(profile)))
