"""What a GPU's scale-up link can physically be: its own generation, and at most the rate of its links.

A System that puts a GPU on a link generation it does not have (an A100 on NVLink 4, an H100 on NVLink 5, a
PCIe-only L40S on NVLink) describes no machine that exists; it may still be a deliberate what-if, so it loads
with a warning that names both. A bandwidth above what the links can carry (more than an x16 slot of the PCIe
generation, more than the GPU's NVLink or Infinity Fabric links at their per-link rate) is a typo or a
bidirectional figure entered as per direction, and is refused.
"""

from __future__ import annotations

from linkscope.hardware.specs import GpuSpec, LinkSpec

TOLERANCE = 1.01
"""Rates a hair above the link's (a datasheet rounded up) are not errors."""

_NAMES = {"nvlink": "NVLink", "infinity-fabric": "Infinity Fabric", "pcie": "PCIe"}


class HardwareWarning(UserWarning):
    """A System that loads but describes hardware that does not exist (printed as one `warning:` line)."""

    user_facing = True


def _link_name(link: LinkSpec) -> str:
    return link.name or f"{_NAMES.get(link.family, link.family)} {link.generation}"


def generation_problem(gpu: GpuSpec, link: LinkSpec) -> str | None:
    """Why `gpu` cannot have scale-up link `link` (a generation other than its own); None when it can. PCIe is
    every GPU's host link, so any generation of it is allowed (a board in an older slot runs at the slot's)."""
    if link.family == "pcie":
        return None
    if gpu.scale_up_link is None:
        return f"{gpu.id} has no {_NAMES.get(link.family, link.family)} port; '{link.id}' describes another GPU"
    if link.id != gpu.scale_up_link:
        return (f"{gpu.id} has {gpu.scale_up_link}, not {link.id} ({_link_name(link)}): the figures describe "
                "another GPU's link")
    return None


def max_bw_gb_per_s(gpu: GpuSpec, link: LinkSpec) -> float | None:
    """The most one GPU can move per direction over `link`: an x16 slot of a PCIe generation; the GPU's own
    NVLink links (or the generation's count, for another GPU's generation) at the per-link rate; None unknown."""
    if link.family == "pcie" or link.per_link_gb_per_s is None:
        return link.bw_gb_per_s
    own = link.id == gpu.scale_up_link and link.family == "nvlink" and gpu.nvlink_links
    links = gpu.nvlink_links if own else link.links_per_gpu
    return link.per_link_gb_per_s * links if links else link.bw_gb_per_s


def bandwidth_problem(gpu: GpuSpec, link: LinkSpec, bw_gb_per_s: float) -> str | None:
    """Why `bw_gb_per_s` (per GPU, per direction) is impossible for `gpu` on `link`; None when it is possible."""
    most = max_bw_gb_per_s(gpu, link)
    if most is None or bw_gb_per_s <= most * TOLERANCE:
        return None
    return (f"{bw_gb_per_s:g} GB/s per direction is more than {gpu.id} can move over {_link_name(link)} "
            f"(at most {most:g} GB/s; a bidirectional figure is twice the per-direction one)")
