"""``casstore report SOURCE... -o report.html``: one self-contained HTML file (issue 14).

:func:`casstore.report.api.write_report` scores each SOURCE (through :mod:`casstore.sources`
and :mod:`scoring`), compares every later run with the first
(:mod:`casstore.comparison`), gathers what the page shows into one JSON object
(:mod:`casstore.report.payload`) and writes it, embedded once, into a page whose CSS and
JavaScript are casstore's own (``assets/``; :mod:`casstore.report.page`): no network, no
library fetched, canvas for the per-task charts so that 10,000 tasks stay responsive.
"""

from __future__ import annotations

__all__: list[str] = []
