"""Reports over stored probe rows: a self-contained HTML page (inline SVG plots), Markdown, JSON."""

from realprobe.report.build import ReportData, build_report
from realprobe.report.render import render_html, render_json, render_markdown

__all__ = ["ReportData", "build_report", "render_html", "render_json", "render_markdown"]
