"""The collectives of one training step, per parallel group, as the step model issues them.

Megatron-LM with sequence parallelism: per layer and micro-batch 6 all-gathers and 4 reduce-scatters for TP
(an all-reduce pair without sequence parallelism; full recomputation replays the forward's), 2 x interleave
send/recvs per micro-batch for PP, one gradient reduction per step for DP (reduce-scatter + all-gather with a
distributed optimizer; ZeRO-2 reduce-scatters every micro-batch), or with ZeRO-3 two weight gathers and one
gradient reduce-scatter per layer and micro-batch, each split into the collectives the framework issues (one
per layer for FSDP, one per weight matrix for DeepSpeed); for an MoE model one dispatch and one combine per MoE layer
and micro-batch in forward and the same again in backward (listed as all-to-alls of the tokens' topk copies; the
step model times them with the MoE model, model/comm/moe.py). `plan` lists them beside each group's time on the
critical path, which `exposed_per_group_s` takes from the step model under the plan's rank order.
"""

from __future__ import annotations

import math

import numpy as np

from linkscope.model.step.compute import compute_constants
from linkscope.model.step.layout import Layout, Layouts
from linkscope.model.step.job import Job
from linkscope.model.step import peft as lora
from linkscope.model.step.memory import gradient_bytes
from linkscope.model.step.train import BF16_BYTES, StepEstimate, zero3_collectives

REFERENCE_BYTES = 64 * 2**20

CommItems = dict[str, list[tuple[str, float, float]]]
"""Per dim: (op, size in bytes as nccl-tests counts it, times per step)."""


def reference_items() -> CommItems:
    """The same 64 MiB collective for every group: a comparison of placements by bytes moved, no model needed."""
    return {"tp": [("all_reduce", REFERENCE_BYTES, 1)], "cp": [("all_gather", REFERENCE_BYTES, 1)],
            "pp": [("sendrecv", REFERENCE_BYTES, 1)], "dp": [("all_reduce", REFERENCE_BYTES, 1)]}


def step_items(job: Job, layout: Layout) -> CommItems:
    """The collectives of one training step for a layout, as the step model issues them."""
    m, c = job.model, compute_constants()
    tp, pp, dp, cp = layout.tp, layout.pp, layout.dp, layout.cp
    tokens = layout.micro_batch * job.seq_len / cp
    microbatches = job.global_batch / (dp * layout.micro_batch)
    layers = math.ceil(m.layers / pp)
    per_layer = layers * microbatches
    act = tokens * m.hidden * BF16_BYTES
    # Full recomputation replays the forward pass, its TP collectives included.
    replay = 1 if layout.recompute == "full" else 0
    # A frozen base has no weight gradients: backward skips the two all-gathers redone for them.
    weight_grad_gathers = 0 if job.peft is not None else 2
    tp_items = [("all_gather", act, (4 + weight_grad_gathers + 2 * replay) * per_layer),
                ("reduce_scatter", act, (4 + 2 * replay) * per_layer)]
    if not layout.sequence_parallel:
        tp_items = [("all_reduce", act, (4 + 2 * replay) * per_layer)]
    kv = 2.0 * tokens * cp * m.kv_dim / tp * BF16_BYTES
    # A GPU trains its own routed experts only (experts / (ep x etp) of them); their reduction runs over the expert
    # data-parallel ranks, a subset of dp, and is priced on the dp group here.
    expert = m.expert_params_per_layer()
    shard = (m.layer_params() - expert) / tp + expert / (layout.ep * layout.etp)
    params = layers * shard + m.embedding_params() / tp
    weight_bytes, grad_shard = c.weight_bytes, shard
    if job.peft is not None:
        # Only the adapters train and reduce; a sharded frozen base is still gathered, in its stored format.
        params = lora.stage_trainable_params(m, job.peft, layers) / tp
        weight_bytes, grad_shard = lora.base_bytes_per_param(job.peft), lora.adapter_params_per_layer(m, job.peft) / tp
    dp_items: list[tuple[str, float, float]] = [("all_reduce", params * gradient_bytes(job), 1)]
    if layout.zero >= 1:
        # ZeRO-2 reduce-scatters every micro-batch (its gradients are sharded, so they cannot accumulate).
        dp_items = [("reduce_scatter", params * gradient_bytes(job), microbatches if layout.zero == 2 else 1),
                    ("all_gather", params * c.weight_bytes, 1)]
    if layout.zero >= 3:
        # FSDP / ZeRO-3: each layer's weights are gathered for forward and again for backward, and its
        # gradients reduce-scattered, every micro-batch, in as many collectives per layer as the framework
        # issues (one for FSDP's flat unit, one per weight matrix for DeepSpeed).
        k = zero3_collectives(job)
        dp_items = [("all_gather", shard * weight_bytes / k, 2 * k * per_layer),
                    ("reduce_scatter", grad_shard * gradient_bytes(job) / k, k * per_layer)]
    moe_layers = layers * m.moe_layers / m.layers
    ep_bytes = tokens / tp * m.topk * m.hidden * BF16_BYTES
    ep_items = [("all_to_all", ep_bytes, 4 * moe_layers * microbatches)] if m.is_moe and layout.ep > 1 else []
    return {"ep": ep_items, "tp": tp_items,
            "cp": [("all_gather", kv, 2 * per_layer), ("reduce_scatter", kv, per_layer)],
            "pp": [("sendrecv", act / tp, 2 * layout.interleave * microbatches)], "dp": dp_items}


def exposed_per_group_s(est: StepEstimate, lay: Layouts, i: int = 0) -> dict[str, float]:
    """Each group's time on the critical path of layout `i`'s step, as the step model charges it: TP (with what
    full recomputation replays), CP, PP and EP on every micro-batch, and so also in the pipeline bubble, which
    repeats (pp - 1) / interleave micro-batches of the stage's time; DP once per step. The rest of the step
    (compute, recomputation's compute, the optimizer and their share of the bubble) is the same wherever the
    groups sit, so two rank orders of one layout differ by exactly the change in these."""
    per_micro_batch = 1.0 + (float(lay.pp[i]) - 1.0) / (float(lay.v[i]) * float(est.microbatches[i]))

    def at(values: np.ndarray) -> float:
        return float(values[i]) if len(values) else 0.0

    return {"tp": per_micro_batch * (at(est.tp_comm_exposed_s) + at(est.tp_replay_s)),
            "cp": per_micro_batch * at(est.cp_comm_exposed_s),
            "pp": per_micro_batch * at(est.pp_comm_exposed_s),
            "ep": per_micro_batch * (at(est.ep_comm_exposed_s) + at(est.ep_replay_s)),
            "dp": at(est.dp_comm_exposed_s)}
