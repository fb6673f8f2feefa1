"""Systems and offerings as plain JSON-able dicts, and back.

Used to store the probed System with every run, to write calibrated profiles, and for `--json` output.
The dict uses the same field names as the YAML data files, so a stored System can be saved as a System file.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from typing import Any

from linkscope.hardware.errors import DataError
from linkscope.hardware.offering import Offering
from linkscope.hardware.system import NodeSpec, ScaleOut, ScaleUp, System


def scale_up_dict(su: ScaleUp) -> dict[str, Any]:
    """The scale-up domain as JSON, with the per-pair bandwidth spelt out."""
    return {**asdict(su), "pair_bw_gb_per_s": round(su.pair_bw_gb_per_s(), 3)}


def scale_out_dict(so: ScaleOut) -> dict[str, Any]:
    """The scale-out fabric as JSON, with the node total spelt out."""
    return {**asdict(so), "total_gbit_per_s": so.total_gbit_per_s}


def node_dict(node: NodeSpec) -> dict[str, Any]:
    """A node type as JSON; the GPU is named by id."""
    return {
        "gpu": node.gpu.id,
        "gpus": node.gpus,
        "gpu_memory_gib": node.gpu.memory_gib,
        "scale_up": scale_up_dict(node.scale_up),
        "scale_out": scale_out_dict(node.scale_out),
        "host_pcie": node.host_pcie,
        "cpu_vendor": node.cpu_vendor,
        "cpu_sockets": node.cpu_sockets,
    }


def system_dict(system: System) -> dict[str, Any]:
    """A System as JSON."""
    return {
        "id": system.id,
        "name": system.name,
        "description": system.description,
        "origin": system.origin,
        "nodes": system.nodes,
        "gpus_total": system.gpus,
        **node_dict(system.node),
        "max_nodes": system.max_nodes,
        "notes": list(system.notes),
        "source": system.source,
        "as_of": _iso(system.as_of),
    }


def offering_dict(o: Offering) -> dict[str, Any]:
    """One catalog row as JSON (the `linkscope catalog --json` shape)."""
    node = node_dict(o.system.node)
    return {
        "id": o.id,
        "provider": o.provider,
        "instance": o.instance,
        **node,
        "price_per_hour": o.price_per_hour,
        "spot_price_per_hour": o.spot_price_per_hour,
        "price_per_gpu_hour": None if o.price_per_gpu_hour is None else round(o.price_per_gpu_hour, 4),
        "currency": o.currency if o.price_per_hour is not None or o.spot_price_per_hour is not None else None,
        "price_as_of": _iso(o.price_as_of),
        "price_date_basis": o.price_date_basis if o.price_as_of is not None else None,
        "price_source": o.price_source,
        "regions": list(o.regions),
        "multi_node": o.multi_node,
        "books_whole_domain": o.books_whole_domain,
        "unconfirmed": list(o.unconfirmed),
        "notes": o.notes,
        "source": o.source,
        "as_of": _iso(o.as_of),
    }


def _iso(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


def system_from_dict(data: dict[str, Any], gpu_lookup: Any) -> System:
    """Rebuild a System from `system_dict` output. `gpu_lookup(name)` returns a GpuSpec or None."""
    try:
        gpu = gpu_lookup(data["gpu"])
        if gpu is None:
            raise DataError("stored system", f"unknown GPU '{data['gpu']}'", entry=data.get("id"), field="gpu")
        su = {k: v for k, v in data["scale_up"].items() if k != "pair_bw_gb_per_s"}
        so = {k: v for k, v in data["scale_out"].items() if k != "total_gbit_per_s"}
        node = NodeSpec(gpu=gpu, gpus=int(data["gpus"]), scale_up=ScaleUp(**su), scale_out=ScaleOut(**so),
                        host_pcie=data.get("host_pcie"), cpu_vendor=data.get("cpu_vendor"),
                        cpu_sockets=int(data.get("cpu_sockets", 2)))
        as_of = data.get("as_of")
        return System(id=data["id"], node=node, nodes=int(data.get("nodes", 1)), name=data.get("name", ""),
                      description=data.get("description", ""), origin=data.get("origin", "file"),
                      source=data.get("source", ""), as_of=date.fromisoformat(as_of) if as_of else None,
                      max_nodes=data.get("max_nodes"), notes=tuple(data.get("notes", ())))
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError("stored system", f"malformed system record ({exc})", entry=data.get("id")) from None
