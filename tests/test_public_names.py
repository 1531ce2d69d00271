"""The public names are pinned: adding, renaming or removing one is a decision made here, in
review, not a side effect of an import. Everything else in the package is internal and may
change between releases (the room `__init__` lists say what each room offers the rooms above).
"""

from __future__ import annotations

import importlib

import pytest

FRONT_DOOR = {
    "BadArgument", "Cassette", "CassetteError", "Catalog", "CatalogError", "ClientConfig",
    "Clock", "Drift", "DriftReport", "ErrorCode", "HeldBack", "HostGates", "HttpClient", "Mode",
    "NoDatabase", "PROJECT_URL", "Profile", "RealClock", "RealprobeError", "ReportData", "Rows",
    "RunSummary", "Sandbox", "Stats", "StatsReport", "Store", "SyncHttpClient", "TaskBatch",
    "TaskBatchResult", "EvalSettings", "Tool", "ToolError", "ToolResult", "TransportOptions",
    "USER_AGENT",
    "VantageStats", "VirtualClock", "__version__", "build_report", "calibrate",
    "calibrate_export", "call", "call_all", "call_tool", "call_tool_sync", "check_alerts",
    "data_dir", "default_catalog", "doc_path", "drift", "evaluate", "export_cassette",
    "export_profile",
    "import_cassette", "import_openapi", "inspect_cassette", "load_cassette", "load_catalog",
    "load_profile", "make_client", "make_report", "make_sandbox", "make_sync_client",
    "mcp_export", "mcp_import", "mcp_proxy", "mcp_replay", "merge_databases", "options",
    "plan_tasks",
    "probe", "probe_mcp", "public_apis", "record_fixtures", "record_round", "recover_cassette",
    "replay_round", "rows", "run_demo", "run_probes", "run_tasks", "sandbox_running",
    "save_cassette", "save_profile", "schedule", "schedule_mcp", "scrub_cassette",
    "serve_exporter", "serve_mcp", "stats", "sweep", "task_results", "use_cassette",
    "verify_cassette", "window", "write_report",
    "import_history", "imported_stats", "calibrate_imported",
    # the one opener of the database, and the handle its readers and writers take
    "open_db", "Database",
    # types a script builds or catches
    "ApiSpec", "BadResponse", "Burst", "DeadlineExceeded", "FaultModel", "LatencyModel",
    "Lognormal", "McpService", "MixtureComponent", "Politeness", "PolitenessConfig",
    "ProfileError", "RetryAfter", "ServiceOptions", "Task", "TaskFileError", "ToolProfile",
}

ROOMS = {
    "realprobe.http": {
        "ClientConfig", "HttpClient", "Mode", "SandboxRouter", "SyncHttpClient",
        "SyncSandboxRouter",
    },
    "realprobe.cassettes": {
        "Cassette", "CassetteError", "CassetteExhausted", "CassetteMiss", "CassetteSession",
        "MATCHER_NAMES", "RECORD_MODES", "RecordingTransport", "ReplayTransport",
        "SyncRecordingTransport", "SyncReplayTransport", "load_cassette", "recover_cassette",
        "save_cassette", "use_cassette",
    },
}


def test_the_front_door_offers_exactly_the_pinned_names() -> None:
    import realprobe

    assert set(realprobe.__all__) == FRONT_DOOR
    assert len(realprobe.__all__) == len(set(realprobe.__all__)), "a name is listed twice"


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_room_offers_exactly_the_pinned_names(room: str) -> None:
    module = importlib.import_module(room)
    assert set(module.__all__) == ROOMS[room]
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{room}.{name} does not resolve"
