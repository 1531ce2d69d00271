"""Probes: polite probe rounds into SQLite, scheduling them, and the statistics over them.

The package imports nothing itself, so the statistics modules (`stats`, `drift`, ...) load
without the prober's httpx and politeness machinery; `realprobe` offers `run_probes` and
`PolitenessConfig` to scripts.
"""
