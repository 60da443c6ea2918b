"""The report page: one HTML file holding its CSS, its JavaScript and its data.

The data (:func:`casstore.report.payload.payload`) is embedded once, as JSON in a
``<script type="application/json">`` element (``<`` written ``\\u003c``, so no text in it can
close the element); the CSS and JavaScript are casstore's own (``assets/report.css``,
``assets/report.js``), inlined. A first inline script records any error the page meets in
``data-errors`` on ``<html>`` (the tests read it); the drawing script sets ``data-ready`` when
every chart is drawn. With ``#measure`` in the address the page logs its paint timings to
the console (``casstore-paint first-contentful-paint 123.4``), which the benchmark reads.
"""

from __future__ import annotations

import html
from importlib.resources import files
from typing import Any

import orjson

__all__ = ["render"]

_HEAD = """\
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>
addEventListener("error", function (e) {{
  var root = document.documentElement;
  root.dataset.errors = (root.dataset.errors || "") + (e.message || "error") + "\\n";
}});
if (location.hash === "#measure") {{
  new PerformanceObserver(function (list) {{
    list.getEntries().forEach(function (e) {{
      console.log("casstore-paint " + e.name + " " + e.startTime.toFixed(1));
    }});
  }}).observe({{type: "paint", buffered: true}});
}}
</script>
<style>
{css}
</style>
</head>
"""

_BODY = """\
<body>
<header><h1>{title}</h1><p>{subtitle}</p></header>
<main>
<section id="headline"><h2>Headline outputs (95% intervals)</h2>
<div class="cards" id="headline-cards"></div></section>
<section id="curves"><h2>pass@k and pass^k</h2></section>
<section id="comparison"><h2>Comparison (paired by task)</h2></section>
<section id="heatmap"><h2>Tasks × attempts</h2></section>
<section id="failures"><h2>Failure rollup</h2></section>
<section id="groups"><h2>Groups</h2></section>
</main>
<div id="tip"></div>
<script type="application/json" id="data">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""


def _asset(name: str) -> str:
    return (files("casstore.report") / "assets" / name).read_text(encoding="utf-8")


def render(data: dict[str, Any], title: str, subtitle: str) -> bytes:
    """The whole page (UTF-8) for ``data``, with ``title`` and ``subtitle`` (escaped)."""
    options = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS  # label keys may be np.str_
    embedded = orjson.dumps(data, option=options).replace(b"<", b"\\u003c")
    head = _HEAD.format(title=html.escape(title), css=_asset("report.css"))
    body = _BODY.format(
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        data="\0",
        js=_asset("report.js"),
    )
    before, after = body.split("\0")
    return b"".join([head.encode(), before.encode(), embedded, after.encode()])
