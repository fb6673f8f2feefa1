"""Calibrated profiles in advice: when a profile was measured on an offering, its measured link figures
replace the catalog's promises for that offering."""

from __future__ import annotations

from dataclasses import dataclass

from linkscope.hardware.errors import UserError
from linkscope.hardware.offering import Offering
from linkscope.model.calibration.profiles import calibrated_tiers, profile_for_offering
from linkscope.model.comm.tiers import CommTiers


@dataclass(frozen=True)
class Measured:
    """The link tiers a saved profile measured on an offering."""

    profile: str
    tiers: CommTiers


def measured_system(offering: Offering) -> Measured | None:
    """The newest profile calibrated on `offering`, as tiers for the model; None when there is none."""
    try:
        profile = profile_for_offering(offering.id)
        if profile is None:
            return None
        return Measured(profile.name, calibrated_tiers(profile, offering.system))
    except UserError:
        # A broken profile must not break advice for the whole catalog; the catalog figures stand in.
        return None
