"""Self-contained HTML pages: one file, no external resources, figures inlined as SVG.

Build a page from blocks:

    html = page("USL analysis", [
        section("Parameters", table(["name", "value"], rows)),
        section("Fit", figure(fig)),
        notice_list(warnings, kind="warning"),
    ], subtitle="data.csv")
    write(path, html)
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import io
from pathlib import Path
from typing import Any, Iterable, Sequence

from .. import __version__, outputs

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:70rem;
color:#1d232b;line-height:1.45;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #d8dde3;
padding-bottom:.2rem}.sub{color:#5b6570;margin-top:0}
table{border-collapse:collapse;margin:.6rem 0;font-variant-numeric:tabular-nums}
th,td{padding:.25rem .7rem;border-bottom:1px solid #e4e8ec;text-align:right}
th{background:#f3f5f7;font-weight:600}td:first-child,th:first-child{text-align:left}
.warn{background:#fff6e0;border-left:4px solid #e0a800;padding:.4rem .8rem;margin:.3rem 0}
.note{background:#eef5fc;border-left:4px solid #3b82c4;padding:.4rem .8rem;margin:.3rem 0}
.verdict{font-size:1.1rem;background:#eef7ee;border-left:4px solid #2f8f46;padding:.6rem .9rem}
.flag{color:#b3261e;font-weight:600}figure{margin:1rem 0}figure svg{max-width:100%;height:auto}
footer{margin-top:3rem;color:#7a838c;font-size:.85rem}code{background:#f3f5f7;padding:0 .2rem}
"""


def esc(v: Any) -> str:
    return _html.escape(str(v), quote=True)


def page(title: str, blocks: Iterable[str], subtitle: str | None = None) -> str:
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{esc(title)}</h1>"]
    if subtitle:
        parts.append(f'<p class="sub">{esc(subtitle)}</p>')
    parts.extend(blocks)
    parts.append(f"<footer>corecast {esc(__version__)} &middot; {esc(now)}</footer></body></html>")
    return "\n".join(parts) + "\n"


def section(title: str, *blocks: str) -> str:
    return f"<section><h2>{esc(title)}</h2>\n" + "\n".join(blocks) + "</section>"


def paragraph(text: str, cls: str | None = None) -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<p{c}>{esc(text)}</p>"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], flag_rows: Sequence[bool] | None = None) -> str:
    out = ["<table><thead><tr>", *(f"<th>{esc(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = ' class="flag"' if flag_rows is not None and i < len(flag_rows) and flag_rows[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def notice_list(items: Iterable[str], kind: str = "warning") -> str:
    cls = "warn" if kind == "warning" else "note"
    return "\n".join(f'<div class="{cls}">{esc(i)}</div>' for i in items)


def figure(fig: Any, caption: str | None = None) -> str:
    """Inline a matplotlib figure as SVG."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    svg = buf.getvalue()
    start = svg.find("<svg")
    svg = svg[start:] if start >= 0 else svg
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def write(path: str | Path, text: str, what: str = "HTML report") -> None:
    """Write a page through corecast.outputs (no folder is created; the file is named)."""
    outputs.write_text(path, text, what)
