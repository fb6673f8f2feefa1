"""Resolve `--system` once per command: the System, its link tiers and every calibration that applies to it.

`--system` names a preset, a catalog offering, a System file or `profile:NAME` (a calibrated profile); with
`--gpus/--nodes` it is sized. `resolve` turns all of that into one `ResolvedSystem`, which `predict train/
scaling/infer`, `plan`, `advise` and `bench train` take, so two commands asked about the same job on the
same System price it with the same tiers and the same compute. An offering with a saved profile of its own
(`linkscope calibrate --offering`) is resolved with that profile's measured figures wherever it is named,
in `predict` as in `advise`, and says so in its notes.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from linkscope.hardware.errors import UserError
from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.offering import Offering
from linkscope.hardware.resolve import resolve_system
from linkscope.hardware.system import System
from linkscope.model.calibration.train_compute import ComputeScale, compute_scaling, profile_scale, scale_note
from linkscope.model.comm.tiers import CommTiers, comm_tiers

if TYPE_CHECKING:
    # Profiles (and the fits and run records they rebuild) are imported where a profile is read: a preset
    # resolves without them, and a command's start-up pays for what it uses.
    from linkscope.model.calibration.profiles import Profile
    from linkscope.model.calibration.train_fit import TrainFit

PROFILE_SCHEME = "profile"


def split_profile(spec: str) -> str | None:
    """The profile name of `profile:NAME`, else None."""
    scheme, sep, rest = spec.partition(":")
    return rest if sep and scheme == PROFILE_SCHEME else None


@dataclass(frozen=True)
class ResolvedSystem:
    """What `--system` (and `--gpus/--nodes`) came to: the System, its tiers and the calibrations in force.

    `found_system` is None only for a profile measured on CPU ranks, which has a fitted step model
    (`train_fit`) but no GPU System; `system` then says so as a UserError."""

    spec: str
    found_system: System | None
    found_tiers: CommTiers | None
    profile: Profile | None = None
    train_fit: TrainFit | None = None
    """A step model fitted on CPU ranks (`bench train` + `calibrate`): predicts instead of the datasheet model."""
    compute: ComputeScale | None = None
    """A GPU training calibration: the datasheet step model's compute scaled by what was measured."""
    notes: tuple[str, ...] = ()
    """Whose measured figures replace the catalog's (or why a profile could not be used), for every answer."""
    missing: str = ""

    @staticmethod
    def plain(system: System) -> ResolvedSystem:
        """A System as the catalog describes it: modelled tiers, nothing calibrated."""
        return ResolvedSystem(system.id, system, comm_tiers(system))

    @property
    def system(self) -> System:
        """The System, sized (UserError for a profile that has none)."""
        if self.found_system is None:
            raise UserError(self.missing)
        return self.found_system

    @property
    def tiers(self) -> CommTiers:
        """Its communication tiers: measured ones where a profile measured them, else the modelled ones."""
        if self.found_tiers is None:
            raise UserError(self.missing)
        return self.found_tiers

    @property
    def training_notes(self) -> tuple[str, ...]:
        """`notes`, and the compute calibration a training answer is scaled by."""
        scale = (scale_note(self.profile.name, self.compute),) if self.compute and self.profile else ()
        return self.notes + scale

    @property
    def profile_name(self) -> str | None:
        """The name of the profile in force, if any."""
        return self.profile.name if self.profile is not None else None

    def with_nodes(self, nodes: int) -> ResolvedSystem:
        """The same resolution on `nodes` nodes (tiers do not depend on the node count)."""
        return replace(self, found_system=self.system.with_nodes(nodes))

    def with_gpus(self, gpus: int) -> ResolvedSystem:
        """The same resolution on `gpus` GPUs (whole nodes beyond one); UserError when they cannot be laid out."""
        try:
            return replace(self, found_system=self.system.with_gpus(gpus))
        except ValueError as exc:
            raise UserError(f"{exc}", field="gpus") from None

    def computing(self) -> AbstractContextManager[None]:
        """The step model's compute as calibrated for this System (nothing changes without a GPU calibration)."""
        return compute_scaling(self.compute)


def _from_profile(spec: str, profile: Profile, db: HardwareDB) -> ResolvedSystem:
    from linkscope.model.calibration.profiles import calibrated_tiers, profile_system
    from linkscope.model.calibration.train_fit import TrainFit

    fit = TrainFit.from_dict(profile.train) if profile.train is not None else None
    if profile.system is None:
        missing = (f"profile '{profile.name}' was measured on {profile.backend} ranks without a GPU System; "
                   "it can predict collectives only (`predict collective --system profile:NAME`)")
        return ResolvedSystem(spec, None, None, profile, fit, missing=missing)
    system = profile_system(profile, db)
    return ResolvedSystem(spec, system, calibrated_tiers(profile, system), profile, fit, profile_scale(profile))


def resolve_offering(offering: Offering) -> ResolvedSystem:
    """An offering with the newest profile measured on it (its tiers and compute scale), else as the catalog
    promises it. A profile that cannot describe the offering leaves the catalog figures, and says why."""
    from linkscope.model.calibration.profiles import calibrated_tiers, profile_for_offering

    plain = ResolvedSystem.plain(offering.system)
    plain = replace(plain, spec=offering.id)
    try:
        profile = profile_for_offering(offering.id)
    except UserError:
        return plain  # no readable profile names this offering
    if profile is None:
        return plain
    if profile.train is not None or profile.backend == "gloo":
        return replace(plain, notes=(f"profile {profile.name} was fitted on {profile.backend} CPU ranks, which say "
                                     f"nothing about {offering.id}'s GPUs: catalog figures used",))
    try:
        tiers, scale = calibrated_tiers(profile, offering.system), profile_scale(profile)
    except UserError as exc:
        # A broken profile must not break advice for the whole catalog; the catalog figures stand in, and say so.
        return replace(plain, notes=(f"profile {profile.name} is unusable ({exc}): catalog figures used",))
    return replace(plain, found_tiers=tiers, profile=profile, compute=scale,
                   notes=(f"uses measured figures from profile {profile.name}",))


def _unsized(spec: str, db: HardwareDB) -> ResolvedSystem:
    name = split_profile(spec)
    if name is not None:
        from linkscope.model.calibration.profiles import load_profile

        return _from_profile(spec, load_profile(name), db)
    key = spec.strip()
    if key not in db.systems and key in db.offerings:
        return resolve_offering(db.offerings[key])
    return replace(ResolvedSystem.plain(resolve_system(spec, db)), spec=spec)


def resolve(spec: str, db: HardwareDB, gpus: int | None = None, nodes: int | None = None) -> ResolvedSystem:
    """`--system` resolved once, sized to `gpus` or `nodes` when given (UserError for what cannot be)."""
    if gpus is not None and nodes is not None:
        raise UserError("give --gpus or --nodes, not both")
    resolved = _unsized(spec, db)
    if resolved.found_system is None:
        return resolved  # a CPU-fitted profile: sized by its fit, not by a System
    if nodes is not None:
        resolved = resolved.with_nodes(nodes)
    elif gpus is not None:
        resolved = resolved.with_gpus(gpus)
    system = resolved.system
    if system.max_nodes is not None and system.nodes > system.max_nodes:
        raise UserError(f"{spec} can be booked as at most {system.max_nodes} node(s), not {system.nodes}")
    return resolved
