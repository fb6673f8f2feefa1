"""Resolve `--system` for the model's commands, adding `profile:NAME` (a calibrated profile) to the schemes."""

from __future__ import annotations

from linkscope.hardware.loader import HardwareDB
from linkscope.hardware.resolve import resolve_system
from linkscope.hardware.system import System
from linkscope.model.calibration.profiles import Profile, calibrated_tiers, load_profile, profile_system
from linkscope.model.comm.tiers import CommTiers, comm_tiers

PROFILE_SCHEME = "profile"


def split_profile(spec: str) -> str | None:
    """The profile name of `profile:NAME`, else None."""
    scheme, sep, rest = spec.partition(":")
    return rest if sep and scheme == PROFILE_SCHEME else None


def resolve_with_profiles(spec: str, db: HardwareDB) -> tuple[System, CommTiers, Profile | None]:
    """System, its communication tiers (measured ones for a profile) and the profile if one was named."""
    name = split_profile(spec)
    if name is not None:
        profile = load_profile(name)
        system = profile_system(profile, db)
        return system, calibrated_tiers(profile, system), profile
    system = resolve_system(spec, db)
    return system, comm_tiers(system), None
