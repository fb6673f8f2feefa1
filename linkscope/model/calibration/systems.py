"""Resolve `--system` for the model's commands, adding `profile:NAME` (a calibrated profile) to the schemes."""

from __future__ import annotations

from linkscope.hardware.errors import UserError
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


def sized_system(spec: str, db: HardwareDB, gpus: int | None = None,
                 nodes: int | None = None) -> tuple[System, CommTiers]:
    """`--system` resolved once, with its tiers (calibrated for a profile), sized to `gpus` or `nodes`."""
    system, tiers, _ = resolve_with_profiles(spec, db)
    if gpus is not None and nodes is not None:
        raise UserError("give --gpus or --nodes, not both")
    if nodes is not None:
        system = system.with_nodes(nodes)
    elif gpus is not None:
        try:
            system = system.with_gpus(gpus)
        except ValueError as exc:
            raise UserError(f"{exc}", field="gpus") from None
    if system.max_nodes is not None and system.nodes > system.max_nodes:
        raise UserError(f"{spec} can be booked as at most {system.max_nodes} node(s), not {system.nodes}")
    return system, tiers
