"""Operations on top of the probe database: Prometheus exporter, alerts, merging vantages.

- `aggregate`: incremental per-tool counters read from the `probes` table (no full scan
  per scrape),
- `metrics`: those counters as Prometheus metric families (`prometheus_client`),
- `blackbox`: one polite on-demand call answered in blackbox_exporter's conventions,
- `exporter`: the HTTP server (`/metrics`, `/probe`, `/status`),
- `status`: the live status page (last 24 h per tool),
- `alerts`: rules, evaluation, webhooks, fire-once/resolve-once state,
- `merge`: several vantage databases into one, idempotently.
"""
