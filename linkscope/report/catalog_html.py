"""`linkscope catalog --html FILE`: the offerings as one self-contained, offline page with a sortable, filterable
table. The rows travel as JSON inside the page and are drawn with textContent, so no value is ever parsed as HTML.
The page takes its initial filters and sort from the URL fragment (`#gpu=H100&min_gpus=8&sort=price-per-gpu`),
so a filtered view can be bookmarked."""

from __future__ import annotations

import html
import json
from typing import Any

from linkscope.hardware.offering import Offering
from linkscope.report.catalog import price_date_text

COLUMNS = [
    ("id", "offering"), ("provider", "provider"), ("gpu", "GPU"), ("family", "family"), ("gpus", "GPUs/node"),
    ("scale_up", "scale-up"), ("scale_up_gb_per_s", "scale-up GB/s"), ("fabric", "fabric"),
    ("scale_out_gbit_per_s", "Gbit/s per node"), ("gpudirect_rdma", "GPUDirect RDMA"),
    ("multi_node", "multi-node"), ("price_per_hour", "per node-hour"), ("price_per_gpu_hour", "per GPU-hour"),
    ("price_as_of", "price date"), ("currency", "currency"), ("region", "region"),
]
"""(key, header) of each column, in order."""


def page_row(o: Offering) -> dict[str, Any]:
    """One offering as the page's JSON row: display values plus the booleans the filters need."""
    node = o.system.node
    su, so = node.scale_up, node.scale_out
    per_gpu = o.price_per_gpu_hour
    return {
        "id": o.id, "provider": o.provider, "gpu": node.gpu.id, "family": node.gpu.family_name,
        "gpus": node.gpus, "scale_up": su.kind, "scale_up_gb_per_s": su.bw_gb_per_s,
        "fabric": so.fabric, "scale_out_gbit_per_s": so.total_gbit_per_s, "gpudirect_rdma": so.gpudirect_rdma,
        "multi_node": o.multi_node,
        "price_per_hour": round(o.price_per_hour, 4) if o.price_per_hour is not None else None,
        "price_per_gpu_hour": round(per_gpu, 4) if per_gpu is not None else None,
        "price_as_of": price_date_text(o) if o.price_as_of else None,
        "currency": o.currency if o.price_per_hour is not None else None,
        "region": ", ".join(o.regions) or None,
        "nvlink": su.is_nvlink, "rdma": so.is_rdma,
    }


_SCRIPT = r"""
const ROWS = JSON.parse(document.getElementById('rows').textContent);
const COLS = JSON.parse(document.getElementById('cols').textContent);
const SORTS = {'price': 'price_per_hour', 'price-per-gpu': 'price_per_gpu_hour', 'scale-out': 'scale_out_gbit_per_s',
               'scale-up': 'scale_up_gb_per_s', 'gpus': 'gpus', 'provider': 'provider', 'gpu': 'gpu', 'id': 'id'};
const DESC = new Set(['scale_out_gbit_per_s', 'scale_up_gb_per_s', 'gpus']);
const F = id => document.getElementById(id);
let sortKey = 'price_per_gpu_hour', sortDesc = false;

function fill(select, values) {
  for (const v of values) { const o = document.createElement('option'); o.value = v; o.textContent = v;
                            select.appendChild(o); }
}
fill(F('gpu'), [...new Set(ROWS.map(r => r.family))].sort());
fill(F('provider'), [...new Set(ROWS.map(r => r.provider))].sort());
fill(F('fabric'), [...new Set(ROWS.map(r => r.fabric))].sort());

function shown(v) {
  if (v === null || v === undefined) return 'unknown';
  if (v === true) return 'yes';
  if (v === false) return 'no';
  return String(v);
}
function num(id) { const v = parseFloat(F(id).value); return Number.isFinite(v) ? v : null; }
function passes(r) {
  const gpu = F('gpu').value, provider = F('provider').value, fabric = F('fabric').value;
  const minGpus = num('min_gpus'), minOut = num('min_scale_out_gbit'), maxPrice = num('max_price_per_gpu_hour');
  const text = F('search').value.trim().toLowerCase();
  if (gpu && r.family !== gpu && r.gpu !== gpu) return false;
  if (provider && r.provider !== provider) return false;
  if (fabric && r.fabric !== fabric) return false;
  if (minGpus !== null && r.gpus < minGpus) return false;
  if (minOut !== null && (r.scale_out_gbit_per_s || 0) < minOut) return false;
  if (maxPrice !== null && (r.price_per_gpu_hour === null || r.price_per_gpu_hour > maxPrice)) return false;
  if (F('nvlink').checked && !r.nvlink) return false;
  if (F('nvswitch').checked && r.scale_up !== 'nvswitch') return false;
  if (F('ib').checked && r.fabric !== 'infiniband') return false;
  if (F('rdma').checked && !r.rdma) return false;
  if (F('multi_node').checked && r.multi_node !== true) return false;
  if (text && !COLS.some(([k]) => shown(r[k]).toLowerCase().includes(text))) return false;
  return true;
}
function compare(a, b) {
  const x = a[sortKey], y = b[sortKey];
  if (x === null && y === null) return a.id < b.id ? -1 : 1;
  if (x === null) return 1;   // unknowns last, whichever the direction
  if (y === null) return -1;
  const c = x < y ? -1 : x > y ? 1 : (a.id < b.id ? -1 : 1);
  return sortDesc ? -c : c;
}
function draw() {
  const body = F('body');
  body.replaceChildren();
  const rows = ROWS.filter(passes).sort(compare);
  for (const r of rows) {
    const tr = document.createElement('tr');
    for (const [k] of COLS) {
      const td = document.createElement('td');
      td.textContent = shown(r[k]);
      if (r[k] === null || r[k] === undefined) td.className = 'unknown';
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
  F('count').textContent = rows.length + ' of ' + ROWS.length + ' offerings';
  for (const th of document.querySelectorAll('th[data-key]'))
    th.className = th.dataset.key === sortKey ? (sortDesc ? 'desc' : 'asc') : '';
}
const head = F('head');
for (const [k, label] of COLS) {
  const th = document.createElement('th');
  th.textContent = label; th.dataset.key = k;
  th.addEventListener('click', () => { sortDesc = sortKey === k ? !sortDesc : DESC.has(k); sortKey = k; draw(); });
  head.appendChild(th);
}
for (const el of document.querySelectorAll('#filters input, #filters select'))
  el.addEventListener('input', draw);
// Initial state from the URL fragment, e.g. #gpu=H100&nvlink=1&sort=price-per-gpu
const params = new URLSearchParams(location.hash.slice(1));
for (const [k, v] of params) {
  if (k === 'sort') { if (SORTS[v]) { sortKey = SORTS[v]; sortDesc = DESC.has(sortKey); } continue; }
  const el = F(k);
  if (!el) continue;
  if (el.type === 'checkbox') el.checked = v !== '0' && v !== ''; else el.value = v;
}
draw();
"""

_STYLE = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
          "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;font-size:12px}"
          "th{cursor:pointer;background:#f4f4f4}th.asc::after{content:' \\25B2'}th.desc::after{content:' \\25BC'}"
          "td.unknown{color:#999}#filters label{margin-right:1em;font-size:13px}#filters input[type=number]"
          "{width:6em}")


def _json_for_script(value: Any) -> str:
    # "</" would end the <script> element early; JSON allows "<\/" for the same text.
    return json.dumps(value, allow_nan=False).replace("</", "<\\/")


def render_catalog_page(offerings: list[Offering], title: str = "linkscope catalog", note: str = "") -> str:
    """The whole page as one string: no external file, script or font, so it works offline."""
    rows = [page_row(o) for o in offerings]
    filters = (
        "<div id='filters'>"
        "<label>GPU <select id='gpu'><option value=''>any</option></select></label>"
        "<label>provider <select id='provider'><option value=''>any</option></select></label>"
        "<label>fabric <select id='fabric'><option value=''>any</option></select></label>"
        "<label>min GPUs <input id='min_gpus' type='number' min='0'></label>"
        "<label>min Gbit/s per node <input id='min_scale_out_gbit' type='number' min='0'></label>"
        "<label>max $/GPU-h <input id='max_price_per_gpu_hour' type='number' min='0' step='0.1'></label>"
        "<label><input id='nvlink' type='checkbox'> NVLink</label>"
        "<label><input id='nvswitch' type='checkbox'> NVSwitch</label>"
        "<label><input id='ib' type='checkbox'> InfiniBand</label>"
        "<label><input id='rdma' type='checkbox'> RDMA</label>"
        "<label><input id='multi_node' type='checkbox'> multi-node</label>"
        "<label>search <input id='search' type='search'></label>"
        "</div>")
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{html.escape(note)}</p>{filters}<p id='count'></p>"
            "<table><thead><tr id='head'></tr></thead><tbody id='body'></tbody></table>"
            f"<script type='application/json' id='rows'>{_json_for_script(rows)}</script>"
            f"<script type='application/json' id='cols'>{_json_for_script(COLUMNS)}</script>"
            f"<script>{_SCRIPT}</script></body></html>\n")
