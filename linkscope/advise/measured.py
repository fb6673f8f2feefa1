"""Calibrated profiles in advice: when a profile was measured on an offering, its measured link figures
replace the catalog's promises for that offering, and a GPU training calibration scales the step model's
compute by what was measured there."""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.hardware.errors import UserError
from linkscope.hardware.offering import Offering
from linkscope.model.calibration.profiles import Profile, calibrated_tiers, profile_for_offering
from linkscope.model.calibration.train_compute import ComputeScale, profile_scale, scale_note
from linkscope.model.comm.tiers import CommTiers


@dataclass(frozen=True)
class Measured:
    """What a saved profile measured on an offering: link tiers, and the compute scale of a training run.
    `tiers` is None when the profile cannot describe the offering (then `note` says why)."""

    profile: str
    tiers: CommTiers | None
    compute: ComputeScale | None = None
    note: str = ""

    @property
    def notes(self) -> list[str]:
        """The lines an option on this offering carries."""
        if self.tiers is None:
            return [self.note]
        out = [f"uses measured figures from profile {self.profile}"]
        return out + ([scale_note(self.profile, self.compute)] if self.compute is not None else [])


def _cpu_training(profile: Profile, offering: Offering) -> Measured | None:
    if profile.train is None:
        return None
    return Measured(profile.name, None, note=f"profile {profile.name} was fitted on {profile.backend} CPU ranks, "
                                             f"which say nothing about {offering.id}'s GPUs: catalog figures used")


def measured_system(offering: Offering) -> Measured | None:
    """The newest profile calibrated on `offering`, as tiers and compute scale for the model; None when there is
    none."""
    try:
        profile = profile_for_offering(offering.id)
    except UserError:
        return None  # no readable profile names this offering
    if profile is None:
        return None
    cpu = _cpu_training(profile, offering)
    if cpu is not None:
        return cpu
    try:
        return Measured(profile.name, calibrated_tiers(profile, offering.system), profile_scale(profile))
    except UserError as exc:
        # A broken profile must not break advice for the whole catalog; the catalog figures stand in, and say so.
        return Measured(profile.name, None, note=f"profile {profile.name} is unusable ({exc}): catalog figures used")
